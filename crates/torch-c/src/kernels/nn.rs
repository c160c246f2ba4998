//! Neural-network functionals: layer_norm...

#![allow(unused_imports)]

use super::*;

pub(crate) fn register(t: &mut Table) {
    // ----- nn -----
    t.insert("aten::layer_norm", |c| {
        let x = c.tensor(0)?;
        let shape = to_shape(&c.ints(1)?)?;
        ok(torchnative_core::layer_norm(
            &x,
            &shape,
            c.opt_tensor(2)?.as_ref(),
            c.opt_tensor(3)?.as_ref(),
            c.float(4)?,
        ))
    });
}
