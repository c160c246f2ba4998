//! Matrix products: mm, bmm, matmul, dot, mv, linear.

#![allow(unused_imports)]

use super::*;

pub(crate) fn register(t: &mut Table) {
    // ----- linear algebra -----
    t.insert("aten::mm", |c| ok(c.tensor(0)?.mm(&c.tensor(1)?)));
    t.insert("aten::bmm", |c| ok(c.tensor(0)?.bmm(&c.tensor(1)?)));
    t.insert("aten::matmul", |c| ok(c.tensor(0)?.matmul(&c.tensor(1)?)));
    t.insert("aten::dot", |c| ok(c.tensor(0)?.matmul(&c.tensor(1)?)));
    t.insert("aten::mv", |c| ok(c.tensor(0)?.matmul(&c.tensor(1)?)));
    t.insert("aten::linear", |c| {
        ok(torchnative_core::linear(
            &c.tensor(0)?,
            &c.tensor(1)?,
            c.opt_tensor(2)?.as_ref(),
        ))
    });
}
