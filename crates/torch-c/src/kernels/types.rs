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
        Scalar::Complex(..) => crate::default_float().to_complex().unwrap_or(DType::C64),
    };
    (dtype, OperandKind::WrappedNumber)
}

fn result(operands: &[(DType, OperandKind)]) -> PyResult<Out> {
    result_type(operands).map(Out::DType).map_err(core_err)
}

pub(crate) fn register(t: &mut Table) {
    t.insert("aten::promote_types", |c| {
        let (a, b) = (c.dtype(0)?, c.dtype(1)?);
        torchnative_core::check_promotable(a, b).map_err(core_err)?;
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

/// Dtype and layout queries and layout-directed allocation.
pub(crate) fn register_queries(t: &mut Table) {
    t.insert("aten::is_floating_point", |c| {
        Ok(Out::Scalar(Scalar::Bool(c.tensor(0)?.dtype().is_float())))
    });
    t.insert("aten::is_complex", |c| {
        Ok(Out::Scalar(Scalar::Bool(c.tensor(0)?.dtype().is_complex())))
    });
    t.insert("aten::is_signed", |c| {
        let d = c.tensor(0)?.dtype();
        Ok(Out::Scalar(Scalar::Bool(!matches!(
            d,
            DType::U8 | DType::Bool
        ))))
    });
    // c10's MemOverlap: 0 no overlap, 1 overlapping, 2 too hard to tell.
    t.insert("aten::_debug_has_internal_overlap", |c| {
        let x = c.tensor(0)?;
        let sizes = x.shape();
        let strides = x.strides();
        if x.is_contiguous() {
            return Ok(Out::Int(0));
        }
        if sizes.iter().zip(strides).any(|(&n, &s)| n > 1 && s == 0) {
            return Ok(Out::Int(1));
        }
        Ok(Out::Int(2))
    });
    // empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype, Layout? layout,
    // Device? device, bool? pin_memory): dense, with dims laid out outermost-first in
    // `physical_layout` order.
    t.insert("aten::empty_permuted", |c| {
        let size = to_shape(&c.ints(0)?)?;
        let order = c.ints(1)?;
        let n = size.len();
        let mut seen = vec![false; n];
        let valid = order.len() == n
            && order.iter().all(|&d| {
                usize::try_from(d).is_ok_and(|d| d < n && !std::mem::replace(&mut seen[d], true))
            });
        if !valid {
            return Err(PyRuntimeError::new_err(format!(
                "empty_permuted: physical_layout {order:?} is not a permutation of {n} dims"
            )));
        }
        let dtype = c.opt_dtype(2)?.unwrap_or_else(crate::default_float);
        let device = c.device(4)?;
        let mut strides = vec![0usize; n];
        let mut next = 1usize;
        for &d in order.iter().rev() {
            strides[d as usize] = next;
            next *= size[d as usize];
        }
        let numel: usize = size.iter().product();
        let flat = Tensor::empty_on(&[numel], dtype, device).map_err(core_err)?;
        ok(flat.as_strided(&size, &strides, 0))
    });
}
