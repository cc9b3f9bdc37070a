//! Conversions into `ndarray` arrays (Cargo feature `ndarray`).

use ndarray::{ArrayD, ArrayViewD, IxDyn};

use crate::{DenseTensor, DenseView, Element};

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
        Some(self.view::<T>()?.to_owned())
    }

    /// The tensor as an `ndarray` view of element type `T`, without
    /// copying, or `None` when the dtype is not `T` (or the shape does not
    /// match the values).
    ///
    /// ```
    /// use grist_tensor::{DenseTensor, Values};
    /// let t = DenseTensor { shape: vec![2, 2], values: Values::Float32(vec![1.0, 2.0, 3.0, 4.0]) };
    /// let a = t.view::<f32>().unwrap();
    /// assert_eq!(a[[1, 1]], 4.0);
    /// assert_eq!(a.as_ptr(), t.values.as_f32().unwrap().as_ptr());
    /// ```
    pub fn view<T: Element>(&self) -> Option<ArrayViewD<'_, T>> {
        ArrayViewD::from_shape(IxDyn(&self.shape), self.values.as_slice::<T>()?).ok()
    }
}

impl<'a, T: Element> DenseView<'a, T> {
    /// The column as an `ndarray` view, without copying (`None` when the
    /// shape does not match the values).
    pub fn to_ndarray(&self) -> Option<ArrayViewD<'a, T>> {
        ArrayViewD::from_shape(IxDyn(self.shape), self.values).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Values;

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
