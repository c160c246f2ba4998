//! Element types, Python-style scalars, devices and PyTorch's type-promotion rules.

use crate::error::{Error, Result};

/// Element type of a tensor (the subset of `torch.dtype` this crate supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
    /// `complex64`: two f32 (real, imag).
    C64,
    /// `complex128`: two f64 (real, imag).
    C128,
    /// `uint16`, `uint32`, `uint64`: upstream's "barebones" unsigned types, which store,
    /// convert and move but take part in little arithmetic and in no mixed promotion.
    U16,
    U32,
    U64,
}

/// The real dtypes, in a fixed order (useful for tests and tables); see [`COMPLEX_DTYPES`]., in a fixed order (useful for tests and tables).
pub const ALL_DTYPES: [DType; 10] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::I16,
    DType::I8,
    DType::U8,
    DType::Bool,
];

/// The complex dtypes.
pub const COMPLEX_DTYPES: [DType; 2] = [DType::C64, DType::C128];

/// Upstream's barebones unsigned dtypes (see [`DType::U16`]).
pub const BAREBONES_UNSIGNED: [DType; 3] = [DType::U16, DType::U32, DType::U64];

/// PyTorch's default floating dtype (`torch.get_default_dtype()`), used for integer
/// true-division, Python float scalars and float-only unary ops on integer inputs.
pub const DEFAULT_FLOAT: DType = DType::F32;

impl DType {
    /// True for F32, F64, F16, BF16.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// True for the signed and unsigned integer dtypes (not Bool).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I64
                | DType::I32
                | DType::I16
                | DType::I8
                | DType::U8
                | DType::U16
                | DType::U32
                | DType::U64
        )
    }

    /// True for uint16, uint32 and uint64 (see [`DType::U16`]).
    pub fn is_barebones_unsigned(self) -> bool {
        matches!(self, DType::U16 | DType::U32 | DType::U64)
    }

    /// True for complex64 and complex128.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The complex dtype with this float dtype's precision (`float32` -> `complex64`); `None`
    /// for dtypes without one here (float16's complex32 is not supported).
    pub fn to_complex(self) -> Option<DType> {
        match self {
            DType::F32 => Some(DType::C64),
            DType::F64 => Some(DType::C128),
            DType::C64 | DType::C128 => Some(self),
            _ => None,
        }
    }

    /// The float dtype of a complex dtype's parts (`complex64` -> `float32`); other dtypes
    /// map to themselves.
    pub fn to_real(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            other => other,
        }
    }

    /// Size of one element in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::C128 => 16,
            DType::F64 | DType::I64 | DType::C64 | DType::U64 => 8,
            DType::U32 => 4,
            DType::U16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// PyTorch's name, e.g. `"float32"`, `"bfloat16"`, `"bool"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I16 => "int16",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::Bool => "bool",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
        }
    }

    /// Parses PyTorch's name (as produced by [`DType::name`]).
    pub fn from_name(name: &str) -> Result<DType> {
        ALL_DTYPES
            .iter()
            .chain(&COMPLEX_DTYPES)
            .chain(&BAREBONES_UNSIGNED)
            .copied()
            .find(|d| d.name() == name)
            .ok_or_else(|| crate::error::invalid("dtype", format!("unknown dtype name '{name}'")))
    }
}

/// `torch.promote_types`: the smallest dtype both arguments convert to without losing category.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    if a.is_barebones_unsigned() || b.is_barebones_unsigned() {
        // With bool the unsigned type stays, with a float or complex type that type wins;
        // other mixes are refused by `check_promotable` (the wider is returned for them).
        return match (a, b) {
            (Bool, u) | (u, Bool) => u,
            (u, x) | (x, u) if u.is_barebones_unsigned() && (x.is_float() || x.is_complex()) => x,
            _ if a.size_in_bytes() >= b.size_in_bytes() => a,
            _ => b,
        };
    }
    if a.is_complex() || b.is_complex() {
        // The wider precision of the two, as a complex type (float16/bfloat16 and integers
        // fit in complex64).
        let wide = |d: DType| matches!(d, F64 | C128);
        return if wide(a) || wide(b) { C128 } else { C64 };
    }
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (F16, BF16) | (BF16, F16) => F32,
        _ if a.is_float() && b.is_float() => {
            if a.size_in_bytes() >= b.size_in_bytes() {
                a
            } else {
                b
            }
        }
        _ if a.is_float() => a,
        _ if b.is_float() => b,
        // Both integers: uint8 mixed with a signed type needs the next wider signed type.
        (U8, I8) | (I8, U8) => I16,
        (U8, x) | (x, U8) => x,
        _ => {
            if a.size_in_bytes() >= b.size_in_bytes() {
                a
            } else {
                b
            }
        }
    }
}

/// Upstream refuses to promote uint16/uint32/uint64 with any other dtype than itself, bool,
/// or a float or complex type.
pub fn check_promotable(a: DType, b: DType) -> Result<()> {
    let bad = |x: DType, y: DType| {
        x.is_barebones_unsigned() && x != y && y != DType::Bool && !y.is_float() && !y.is_complex()
    };
    if bad(a, b) || bad(b, a) {
        return Err(crate::error::invalid(
            "promote_types",
            format!(
                "Promotion for uint16, uint32, uint64 types is not supported, attempted to \
                 promote {} and {}",
                a.name(),
                b.name()
            ),
        ));
    }
    Ok(())
}

/// A Python number (`bool`, `int` or `float`) used as an operand or fill value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A Python `complex`: (real, imag).
    Complex(f64, f64),
}

impl Scalar {
    /// The dtype PyTorch gives this scalar when it takes part in type promotion
    /// (a Python float counts as the default float dtype).
    pub fn promotion_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DEFAULT_FLOAT,
            Scalar::Complex(..) => DType::C64,
        }
    }

    /// The value as f64 (bools are 0/1; a complex value's real part).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
            Scalar::Complex(re, _) => re,
        }
    }

    /// The value as a complex number (imaginary part 0 for real scalars).
    pub fn to_complex(self) -> crate::complex::Cf64 {
        match self {
            Scalar::Complex(re, im) => crate::complex::Cf64::new(re, im),
            other => crate::complex::Cf64::new(other.to_f64(), 0.0),
        }
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v as i64)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

/// How an operand takes part in `result_type`: PyTorch ranks dimensioned tensors above
/// 0-dim tensors above Python scalars ("wrapped numbers"), but only within a category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperandKind {
    /// A tensor with at least one dimension.
    Dimensioned,
    /// A 0-dim tensor.
    ZeroDim,
    /// A Python scalar.
    WrappedNumber,
}

/// c10's `combine_categories`: the lower-priority state only wins when it is of a higher
/// category (e.g. a float scalar with an int tensor), or when the higher one is Bool.
fn combine_categories(higher: Option<DType>, lower: Option<DType>) -> Result<Option<DType>> {
    Ok(match (higher, lower) {
        (Some(h), _) if h.is_complex() => Some(h),
        // A complex operand of lower priority keeps a float operand's precision
        // (float64 tensor * 1j -> complex128); over integers it wins as it is.
        (Some(h), Some(l)) if l.is_complex() => Some(if h.is_float() {
            h.to_complex().ok_or_else(|| Error::Unsupported {
                op: "result_type",
                reason: format!(
                    "a {} tensor with a complex operand gives a {} result, which torchnative \
                     does not have",
                    h.name(),
                    if h == DType::F16 {
                        "complex32"
                    } else {
                        "bcomplex32"
                    }
                ),
            })?
        } else {
            l
        }),
        (Some(h), _) if h.is_float() => Some(h),
        (Some(h), Some(l)) if h == DType::Bool || l.is_float() => Some(promote_types(h, l)),
        (Some(h), _) => Some(h),
        (None, l) => l,
    })
}

/// `torch.result_type` over any number of operands, each given as (dtype, kind).
/// For a wrapped number pass `Scalar::promotion_dtype()` (a Python float counts as the
/// default float dtype).
pub fn result_type(operands: &[(DType, OperandKind)]) -> Result<DType> {
    let mut states: [Option<DType>; 3] = [None, None, None];
    for &(dtype, kind) in operands {
        let slot = match kind {
            OperandKind::Dimensioned => 0,
            OperandKind::ZeroDim => 1,
            OperandKind::WrappedNumber => 2,
        };
        states[slot] = Some(match states[slot] {
            None => dtype,
            Some(prev) => {
                check_promotable(prev, dtype)?;
                promote_types(prev, dtype)
            }
        });
    }
    combine_categories(states[0], combine_categories(states[1], states[2])?)?
        .ok_or_else(|| crate::error::invalid("result_type", "needs at least one operand"))
}

/// Where a tensor lives. Only CPU (with data) and Meta (shape/dtype only) exist here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Meta,
}

impl Device {
    /// Parses a PyTorch device string; anything but `cpu`/`cpu:0`/`meta` is refused,
    /// naming the device and the operation that asked for it.
    pub fn parse(op: &'static str, name: &str) -> Result<Device> {
        match name {
            "cpu" | "cpu:0" => Ok(Device::Cpu),
            "meta" => Ok(Device::Meta),
            other => Err(Error::UnsupportedDevice {
                op,
                device: other.to_string(),
            }),
        }
    }

    /// PyTorch's name of the device.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Meta => "meta",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promote_table_spot_checks() {
        assert_eq!(promote_types(U8, I8), I16);
        assert_eq!(promote_types(U8, I32), I32);
        assert_eq!(promote_types(F16, BF16), F32);
        assert_eq!(promote_types(I64, F16), F16);
        assert_eq!(promote_types(Bool, U8), U8);
        assert_eq!(promote_types(F32, F64), F64);
        for a in ALL_DTYPES {
            for b in ALL_DTYPES {
                assert_eq!(promote_types(a, b), promote_types(b, a), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn result_type_categories() {
        use OperandKind::*;
        // int tensor + python float -> default float
        assert_eq!(
            result_type(&[(I32, Dimensioned), (F32, WrappedNumber)]).unwrap(),
            F32
        );
        // int32 tensor + python int stays int32
        assert_eq!(
            result_type(&[(I32, Dimensioned), (I64, WrappedNumber)]).unwrap(),
            I32
        );
        // f16 tensor + 0-dim f64 tensor stays f16 (same category)
        assert_eq!(
            result_type(&[(F16, Dimensioned), (F64, ZeroDim)]).unwrap(),
            F16
        );
        // int tensor + 0-dim f64 tensor -> f64 (higher category)
        assert_eq!(
            result_type(&[(I32, Dimensioned), (F64, ZeroDim)]).unwrap(),
            F64
        );
        // bool tensor + python int -> int64
        assert_eq!(
            result_type(&[(Bool, Dimensioned), (I64, WrappedNumber)]).unwrap(),
            I64
        );
        assert!(result_type(&[]).is_err());
    }

    #[test]
    fn devices() {
        assert_eq!(Device::parse("to", "meta").unwrap(), Device::Meta);
        let err = Device::parse("to", "cuda:0").unwrap_err().to_string();
        assert!(err.contains("cuda:0") && err.contains("to"), "{err}");
    }
}
