//! Conversions into `ndarray` arrays (Cargo feature `ndarray`).

use ndarray::{ArrayD, IxDyn};

use crate::{DenseTensor, Values};

/// Element types that a dense tensor can be viewed as.
pub trait Element: Clone {
    /// The values, if `values` holds this type.
    fn slice(values: &Values) -> Option<&[Self]>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            fn slice(values: &Values) -> Option<&[Self]> {
                match values {
                    Values::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
element!(bool, Bool);
element!(i32, Int32);
element!(i64, Int64);
element!(f32, Float32);
element!(f64, Float64);

impl DenseTensor {
    /// Copies the tensor into an `ndarray` array of element type `T`, or
    /// `None` when the dtype is not `T` (strings have no `ndarray` form).
    ///
    /// ```
    /// use grist_tensor::{DenseTensor, Values};
    /// let t = DenseTensor { shape: vec![2, 2], values: Values::Int64(vec![1, 2, 3, 4]) };
    /// let a = t.to_ndarray::<i64>().unwrap();
    /// assert_eq!(a[[1, 0]], 3);
    /// ```
    pub fn to_ndarray<T: Element>(&self) -> Option<ArrayD<T>> {
        let values = T::slice(&self.values)?;
        ArrayD::from_shape_vec(IxDyn(&self.shape), values.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_dtype_is_none() {
        let t = DenseTensor {
            shape: vec![1],
            values: Values::Float32(vec![1.0]),
        };
        assert!(t.to_ndarray::<i64>().is_none());
        assert_eq!(t.to_ndarray::<f32>().unwrap().shape(), &[1]);
    }
}
