//! GGUF metadata values and their lossless accessors.

/// One GGUF metadata value. Arrays may nest; every element of one array has the same type.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataValue {
    /// GGUF `uint8`.
    U8(u8),
    /// GGUF `int8`.
    I8(i8),
    /// GGUF `uint16`.
    U16(u16),
    /// GGUF `int16`.
    I16(i16),
    /// GGUF `uint32`.
    U32(u32),
    /// GGUF `int32`.
    I32(i32),
    /// GGUF `uint64`.
    U64(u64),
    /// GGUF `int64`.
    I64(i64),
    /// GGUF `float32`.
    F32(f32),
    /// GGUF `float64`.
    F64(f64),
    /// GGUF `bool` (stored as one byte, 0 or 1).
    Bool(bool),
    /// GGUF UTF-8 `string`.
    String(String),
    /// GGUF `array` of one element type (may nest).
    Array(Vec<MetadataValue>),
}

/// The value type ids of the GGUF spec (`gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub(crate) fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The fewest bytes one value of this type occupies in a file: bounds element counts
    /// before anything is allocated.
    pub(crate) fn min_encoded_len(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 => 8,
            String => 8,
            // element type + count
            Array => 12,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

impl MetadataValue {
    pub(crate) fn value_type(&self) -> ValueType {
        match self {
            MetadataValue::U8(_) => ValueType::U8,
            MetadataValue::I8(_) => ValueType::I8,
            MetadataValue::U16(_) => ValueType::U16,
            MetadataValue::I16(_) => ValueType::I16,
            MetadataValue::U32(_) => ValueType::U32,
            MetadataValue::I32(_) => ValueType::I32,
            MetadataValue::U64(_) => ValueType::U64,
            MetadataValue::I64(_) => ValueType::I64,
            MetadataValue::F32(_) => ValueType::F32,
            MetadataValue::F64(_) => ValueType::F64,
            MetadataValue::Bool(_) => ValueType::Bool,
            MetadataValue::String(_) => ValueType::String,
            MetadataValue::Array(_) => ValueType::Array,
        }
    }

    /// The GGUF type name of this value (`"u32"`, `"string"`, `"array"`...), for messages.
    pub fn type_name(&self) -> &'static str {
        self.value_type().name()
    }

    /// The value as `u64` when it is an integer that fits without loss (negative values and
    /// non-integers give `None`).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => Some(v),
            MetadataValue::I8(v) => u64::try_from(v).ok(),
            MetadataValue::I16(v) => u64::try_from(v).ok(),
            MetadataValue::I32(v) => u64::try_from(v).ok(),
            MetadataValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as `i64` when it is an integer that fits without loss.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetadataValue::I8(v) => Some(v.into()),
            MetadataValue::I16(v) => Some(v.into()),
            MetadataValue::I32(v) => Some(v.into()),
            MetadataValue::I64(v) => Some(v),
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as `f64`: floats as stored, integers only when exactly representable.
    pub fn as_f64(&self) -> Option<f64> {
        const EXACT: i64 = 1 << 53;
        match *self {
            MetadataValue::F32(v) => Some(v.into()),
            MetadataValue::F64(v) => Some(v),
            _ => {
                let i = self.as_i64()?;
                (-EXACT..=EXACT).contains(&i).then_some(i as f64)
            }
        }
    }

    /// The value as `f32`: `f32` as stored, `f64` rounded to nearest, integers only when
    /// exactly representable.
    pub fn as_f32(&self) -> Option<f32> {
        const EXACT: i64 = 1 << 24;
        match *self {
            MetadataValue::F32(v) => Some(v),
            MetadataValue::F64(v) => Some(v as f32),
            _ => {
                let i = self.as_i64()?;
                (-EXACT..=EXACT).contains(&i).then_some(i as f32)
            }
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetadataValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetadataValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[MetadataValue]> {
        match self {
            MetadataValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MetadataValue as V;

    #[test]
    fn integer_accessors_refuse_lossy_conversions() {
        assert_eq!(V::I32(-1).as_u64(), None);
        assert_eq!(V::I32(7).as_u64(), Some(7));
        assert_eq!(V::U64(u64::MAX).as_i64(), None);
        assert_eq!(V::U64(5).as_i64(), Some(5));
        assert_eq!(V::F32(1.0).as_u64(), None, "floats are not integers");
        assert_eq!(V::Bool(true).as_u64(), None);
        assert_eq!(V::U32(1 << 24).as_f32(), Some(16_777_216.0));
        assert_eq!(V::U32((1 << 24) + 1).as_f32(), None, "not exact in f32");
        assert_eq!(V::String("x".into()).as_str(), Some("x"));
        assert_eq!(V::U8(1).as_bool(), None);
    }
}
