//! AdamW with its moments in reach: the same operations in the same order as `candle_nn::AdamW`
//! (a test checks the weights agree bit for bit), so earlier runs replay exactly, but its state can
//! be written out and read back, so a long run can stop and go on (`Trainer::save_state`).

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{Result, Tensor, Var};
pub use candle_nn::ParamsAdamW;

struct Slot {
    name: String,
    var: Var,
    first_moment: Var,
    second_moment: Var,
}

pub struct AdamW {
    slots: Vec<Slot>,
    params: ParamsAdamW,
    step_t: usize,
}

impl AdamW {
    /// Over `vars` (name, variable), moments at zero.
    pub fn new(vars: Vec<(String, Var)>, params: ParamsAdamW) -> Result<Self> {
        let slots = vars
            .into_iter()
            .map(|(name, var)| {
                let zeros = || Var::zeros(var.shape(), var.dtype(), var.device());
                Ok(Slot { name, first_moment: zeros()?, second_moment: zeros()?, var })
            })
            .collect::<Result<_>>()?;
        Ok(Self { slots, params, step_t: 0 })
    }

    pub fn set_learning_rate(&mut self, lr: f64) {
        self.params.lr = lr;
    }

    /// One update of every variable that has a gradient in `grads`.
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.step_t += 1;
        let p = &self.params;
        let (lr, beta1, beta2) = (p.lr, p.beta1, p.beta2);
        let scale_m = 1f64 / (1f64 - beta1.powi(self.step_t as i32));
        let scale_v = 1f64 / (1f64 - beta2.powi(self.step_t as i32));
        for s in &self.slots {
            let Some(g) = grads.get(&s.var) else { continue };
            let next_m = ((s.first_moment.as_tensor() * beta1)? + (g * (1.0 - beta1))?)?;
            let next_v = ((s.second_moment.as_tensor() * beta2)? + (g.sqr()? * (1.0 - beta2))?)?;
            let m_hat = (&next_m * scale_m)?;
            let v_hat = (&next_v * scale_v)?;
            let decayed = (s.var.as_tensor() * (1f64 - lr * p.weight_decay))?;
            let adjusted = (m_hat / (v_hat.sqrt()? + p.eps)?)?;
            s.var.set(&(decayed - (adjusted * lr)?)?)?;
            s.first_moment.set(&next_m)?;
            s.second_moment.set(&next_v)?;
        }
        Ok(())
    }

    /// Updates done so far (the bias correction's t).
    pub fn steps_taken(&self) -> usize {
        self.step_t
    }

    /// The moments as named tensors, `{prefix}m.{name}` and `{prefix}v.{name}`.
    pub fn moments(&self, prefix: &str) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(2 * self.slots.len());
        for s in &self.slots {
            out.push((format!("{prefix}m.{}", s.name), s.first_moment.as_tensor().clone()));
            out.push((format!("{prefix}v.{}", s.name), s.second_moment.as_tensor().clone()));
        }
        out
    }

    /// Takes back what [`Self::moments`] wrote under `prefix`, and the count of updates.
    pub fn restore(&mut self, tensors: &HashMap<String, Tensor>, prefix: &str, steps_taken: usize) -> Result<()> {
        for s in &self.slots {
            for (moment, key) in [(&s.first_moment, "m"), (&s.second_moment, "v")] {
                let name = format!("{prefix}{key}.{}", s.name);
                let t = tensors.get(&name).ok_or_else(|| candle_core::Error::Msg(format!("no {name} in the state")))?;
                moment.set(t)?;
            }
        }
        self.step_t = steps_taken;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};
    use candle_nn::Optimizer;

    use super::*;

    /// Three updates of a small least-squares problem by each optimiser.
    fn trained(ours: bool) -> Vec<f32> {
        let dev = Device::Cpu;
        let w = Var::from_vec(vec![0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75], (2, 3), &dev).unwrap();
        let x = Tensor::from_vec(vec![1.0f32, 2.0, -1.0, 0.5, 0.0, 3.0], (3, 2), &dev).unwrap();
        let params = ParamsAdamW { lr: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 };
        let mut mine = AdamW::new(vec![("w".into(), w.clone())], params.clone()).unwrap();
        let mut candle = candle_nn::AdamW::new(vec![w.clone()], params).unwrap();
        for _ in 0..3 {
            let loss = w.as_tensor().matmul(&x).unwrap().sqr().unwrap().sum_all().unwrap();
            let grads = loss.backward().unwrap();
            if ours { mine.step(&grads).unwrap() } else { candle.step(&grads).unwrap() }
        }
        w.as_tensor().flatten_all().unwrap().to_dtype(DType::F32).unwrap().to_vec1().unwrap()
    }

    #[test]
    fn updates_are_candles_bit_for_bit() {
        let (a, b) = (trained(true), trained(false));
        assert_eq!(a, b);
        assert_ne!(a, vec![0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75], "the weights moved");
    }

    #[test]
    fn moments_read_back_into_a_fresh_optimiser() {
        let dev = Device::Cpu;
        let w = Var::from_vec(vec![1.0f32, -2.0], 2, &dev).unwrap();
        let params = ParamsAdamW::default();
        let mut a = AdamW::new(vec![("w".into(), w.clone())], params.clone()).unwrap();
        let grads = w.as_tensor().sqr().unwrap().sum_all().unwrap().backward().unwrap();
        a.step(&grads).unwrap();
        let saved: HashMap<String, Tensor> = a.moments("x.").into_iter().collect();
        assert_eq!(saved.len(), 2);
        let mut b = AdamW::new(vec![("w".into(), w.clone())], params).unwrap();
        b.restore(&saved, "x.", a.steps_taken()).unwrap();
        assert_eq!(b.steps_taken(), 1);
        assert_eq!(b.moments("x.")[0].1.to_vec1::<f32>().unwrap(), saved["x.m.w"].to_vec1::<f32>().unwrap());
        assert!(b.restore(&HashMap::new(), "x.", 1).is_err(), "a missing moment is refused");
    }
}
