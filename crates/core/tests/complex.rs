//! Complex tensors: promotion, casts, the views between complex and real tensors, the complex
//! kernels against hand-computed values, and the refusal of complex operands by every real
//! op family (a real kernel must never drop imaginary parts silently).

use torchnative_core::ops::complex::{self, Reduction};
use torchnative_core::*;

fn c(re: f64, im: f64) -> Cf64 {
    Cf64::new(re, im)
}

fn cx(values: &[Cf64], shape: &[usize], dtype: DType) -> Tensor {
    Tensor::from_complex(values, shape, dtype).unwrap()
}

#[test]
fn promotion_follows_c10() {
    use OperandKind::*;
    assert_eq!(promote_types(DType::C64, DType::F64), DType::C128);
    assert_eq!(promote_types(DType::C64, DType::F16), DType::C64);
    assert_eq!(promote_types(DType::I64, DType::C64), DType::C64);
    assert_eq!(promote_types(DType::C128, DType::Bool), DType::C128);
    // float64 tensor * 1j keeps float64's precision; float32 tensor gives complex64
    assert_eq!(
        result_type(&[(DType::F64, Dimensioned), (DType::C64, WrappedNumber)]).unwrap(),
        DType::C128
    );
    assert_eq!(
        result_type(&[(DType::F32, Dimensioned), (DType::C128, WrappedNumber)]).unwrap(),
        DType::C64
    );
    // an integer tensor takes the complex operand as it is
    assert_eq!(
        result_type(&[(DType::I32, Dimensioned), (DType::C128, ZeroDim)]).unwrap(),
        DType::C128
    );
    // float16 * 1j would be complex32, which torchnative does not have: refused by name
    let err = result_type(&[(DType::F16, Dimensioned), (DType::C64, WrappedNumber)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("complex32"), "{err}");
}

#[test]
fn casts_keep_the_real_part_and_bool_sees_both() {
    let x = cx(&[c(2.5, -1.0), c(0.0, 3.0), c(0.0, 0.0)], &[3], DType::C64);
    assert_eq!(
        x.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
        [2.5, 0.0, 0.0]
    );
    assert_eq!(
        x.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        [2, 0, 0]
    );
    assert_eq!(
        x.to_dtype(DType::Bool).unwrap().to_vec::<bool>().unwrap(),
        [true, true, false]
    );
    let r = Tensor::from_f64s(&[1.5, -2.0], &[2], DType::F64).unwrap();
    let z = r.to_dtype(DType::C128).unwrap();
    assert_eq!(z.to_vec::<Cf64>().unwrap(), [c(1.5, 0.0), c(-2.0, 0.0)]);
    assert_eq!(x.item_at(1), c(0.0, 3.0));
    assert!(!can_cast(DType::C64, DType::F64));
    assert!(can_cast(DType::F64, DType::C64));
}

trait ItemAt {
    fn item_at(&self, i: i64) -> Cf64;
}
impl ItemAt for Tensor {
    fn item_at(&self, i: i64) -> Cf64 {
        match self.select(0, i).unwrap().item().unwrap() {
            Scalar::Complex(re, im) => c(re, im),
            other => panic!("not complex: {other:?}"),
        }
    }
}

#[test]
fn real_views_share_memory() {
    let x = cx(&[c(1.0, 2.0), c(3.0, 4.0), c(5.0, 6.0)], &[3], DType::C64);
    let parts = x.view_as_real().unwrap();
    assert_eq!(parts.shape(), [3, 2]);
    assert_eq!(parts.strides(), [2, 1]);
    assert_eq!(
        parts.to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let imag = x.imag_part().unwrap();
    assert_eq!(
        (imag.strides(), imag.storage_offset()),
        ([2usize].as_slice(), 1)
    );
    // a write through the imaginary view lands in the complex tensor
    imag.fill_(Scalar::Float(-1.0)).unwrap();
    assert_eq!(x.item_at(2), c(5.0, -1.0));
    let back = parts.view_as_complex().unwrap();
    assert!(back.shares_storage(&x));
    assert_eq!(back.to_vec::<Cf64>().unwrap(), x.to_vec::<Cf64>().unwrap());
    // view_as_complex needs a last dim of 2 with stride 1 and even strides
    let odd = Tensor::from_f64s(&[0.0; 6], &[2, 3], DType::F32).unwrap();
    let err = odd.view_as_complex().unwrap_err().to_string();
    assert!(err.contains("last dimension of size 2"), "{err}");
    let err = parts
        .t()
        .unwrap()
        .view_as_complex()
        .unwrap_err()
        .to_string();
    assert!(err.contains("size 2") || err.contains("stride 1"), "{err}");
    assert!(x.real_part().unwrap().to_dtype(DType::F64).is_ok());
}

#[test]
fn kernels_match_hand_computed_values() {
    let x = cx(&[c(1.0, 2.0), c(-0.5, 0.25)], &[2], DType::C128);
    let y = cx(&[c(3.0, -1.0), c(0.0, 2.0)], &[2], DType::C128);
    let prod = complex::binary("mul", &x, &y, |a, b| a * b).unwrap();
    assert_eq!(prod.to_vec::<Cf64>().unwrap(), [c(5.0, 5.0), c(-0.5, -1.0)]);
    let q = complex::binary("div", &prod, &y, |a, b| a / b).unwrap();
    for (got, want) in q
        .to_vec::<Cf64>()
        .unwrap()
        .iter()
        .zip(x.to_vec::<Cf64>().unwrap())
    {
        assert!((got.re - want.re).abs() < 1e-15 && (got.im - want.im).abs() < 1e-15);
    }
    let abs = complex::to_real("abs", &x, |z| z.abs()).unwrap();
    assert_eq!(abs.dtype(), DType::F64);
    assert_eq!(abs.to_vec::<f64>().unwrap()[0], 5f64.sqrt());
    // e^(i pi) = -1
    let ipi = cx(&[c(0.0, std::f64::consts::PI)], &[1], DType::C128);
    let e = complex::unary("exp", &ipi, |z| z.exp())
        .unwrap()
        .to_vec::<Cf64>()
        .unwrap()[0];
    assert_eq!(e.re, -1.0);
    assert!(e.im.abs() < 1e-15);
    // sums, means and products over a dim
    let m = cx(
        &[c(1.0, 1.0), c(2.0, -1.0), c(0.0, 3.0), c(-1.0, 0.5)],
        &[2, 2],
        DType::C64,
    );
    let s = complex::reduce(&m, Reduction::Sum, &[1], false, None).unwrap();
    assert_eq!(s.to_vec::<Cf64>().unwrap(), [c(3.0, 0.0), c(-1.0, 3.5)]);
    let mean = complex::reduce(&m, Reduction::Mean, &[], false, None).unwrap();
    assert_eq!(mean.to_vec::<Cf64>().unwrap(), [c(0.5, 0.875)]);
    let p = complex::reduce(&m, Reduction::Prod, &[0], true, None).unwrap();
    assert_eq!(p.shape(), [1, 2]);
    assert_eq!(p.to_vec::<Cf64>().unwrap(), [c(-3.0, 3.0), c(-1.5, 2.0)]);
    // matmul against the definition; vdot conjugates its first argument
    let mm = complex::matmul(&m, &m).unwrap().to_vec::<Cf64>().unwrap();
    let v = m.to_vec::<Cf64>().unwrap();
    assert_eq!(mm[1], v[0] * v[1] + v[1] * v[3]);
    let d = complex::vdot(&x, &x).unwrap().to_vec::<Cf64>().unwrap()[0];
    assert_eq!(d, c(1.0 + 4.0 + 0.25 + 0.0625, 0.0));
    let n = complex::vector_norm(&x, 2.0, &[], false).unwrap();
    assert!((n.to_vec::<f64>().unwrap()[0] - (5.0f64 + 0.3125).sqrt()).abs() < 1e-15);
}

#[test]
fn real_op_families_refuse_complex_operands() {
    let x = cx(&[c(1.0, 2.0)], &[1], DType::C64);
    let checks: [(&str, Result<Tensor>); 12] = [
        ("sin", x.sin()),
        ("add", x.add(&x)),
        ("sum", x.sum(&[], false)),
        ("mean", x.mean(&[], false)),
        ("prod", x.prod(&[], false)),
        ("amax", x.amax(&[], false)),
        ("argmax", x.argmax(None, false)),
        ("cumsum", x.cumsum(0)),
        ("softmax", x.softmax(0)),
        ("var", x.var(&[], VarOptions::default())),
        ("matmul", x.matmul(&x)),
        ("linear", linear(&x, &x.unsqueeze(0).unwrap(), None)),
    ];
    for (name, r) in checks {
        let err = r.expect_err(name).to_string();
        assert!(err.contains("complex64"), "{name}: {err}");
    }
    assert!(
        x.to_vec::<f64>().is_err(),
        "reading complex values as reals"
    );
}
