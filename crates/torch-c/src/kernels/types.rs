//! Type queries: `promote_types`, `result_type` (with upstream's category rules for 0-dim
//! tensors and Python scalars), `can_cast`.

use super::*;
use torchnative_core::{promote_types, result_type, OperandKind};

fn tensor_operand(t: &Tensor) -> (DType, OperandKind) {
    t.promotion_operand()
}

fn scalar_operand(s: Scalar) -> (DType, OperandKind) {
    let dtype = match s {
        Scalar::Bool(_) => DType::Bool,
        Scalar::Int(_) => DType::I64,
        // A Python float takes part as the default float dtype.
        Scalar::Float(_) => crate::default_float(),
    };
    (dtype, OperandKind::WrappedNumber)
}

fn result(operands: &[(DType, OperandKind)]) -> PyResult<Out> {
    result_type(operands).map(Out::DType).map_err(core_err)
}

pub(crate) fn register(t: &mut Table) {
    t.insert("aten::promote_types", |c| {
        let (a, b) = (c.dtype(0)?, c.dtype(1)?);
        Ok(Out::DType(promote_types(a, b)))
    });
    t.insert("aten::can_cast", |c| {
        Ok(Out::Scalar(Scalar::Bool(torchnative_core::can_cast(
            c.dtype(0)?,
            c.dtype(1)?,
        ))))
    });
    t.insert("aten::result_type.Tensor", |c| {
        result(&[tensor_operand(&c.tensor(0)?), tensor_operand(&c.tensor(1)?)])
    });
    t.insert("aten::result_type.Scalar", |c| {
        result(&[tensor_operand(&c.tensor(0)?), scalar_operand(c.scalar(1)?)])
    });
    t.insert("aten::result_type.Scalar_Tensor", |c| {
        result(&[scalar_operand(c.scalar(0)?), tensor_operand(&c.tensor(1)?)])
    });
    t.insert("aten::result_type.Scalar_Scalar", |c| {
        result(&[scalar_operand(c.scalar(0)?), scalar_operand(c.scalar(1)?)])
    });
}
