//! Colour scales for heatmaps, shared by every drawing path.

/// Viridis, as eight evenly spaced sRGB stops (from matplotlib's published table), interpolated linearly.
/// Perceptually uniform and readable in greyscale and by most colour-blind viewers.
const VIRIDIS_STOPS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// The colour of `t` in [0, 1] (values outside are clamped; NaN is drawn as the lowest colour).
pub fn viridis(t: f32) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (VIRIDIS_STOPS.len() - 1) as f32;
    let i = (x.floor() as usize).min(VIRIDIS_STOPS.len() - 2);
    let f = x - i as f32;
    let (a, b) = (VIRIDIS_STOPS[i], VIRIDIS_STOPS[i + 1]);
    std::array::from_fn(|c| (f32::from(a[c]) + (f32::from(b[c]) - f32::from(a[c])) * f).round() as u8)
}

/// CSS `rgb(...)` of a colour.
pub fn css(rgb: [u8; 3]) -> String {
    format!("rgb({}, {}, {})", rgb[0], rgb[1], rgb[2])
}

/// How probabilities map to [0, 1] before colouring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorScale {
    /// `p / max`.
    Linear,
    /// `log10(p)` over the four decades below `max`, so small but non-zero weights stay visible.
    Log,
}

/// Decades shown by the log scale.
pub const LOG_DECADES: f32 = 4.0;

impl ColorScale {
    pub fn name(self) -> &'static str {
        match self {
            ColorScale::Linear => "linear",
            ColorScale::Log => "log",
        }
    }

    pub fn position(self, p: f32, max: f32) -> f32 {
        if max <= 0.0 || p <= 0.0 {
            return 0.0;
        }
        match self {
            ColorScale::Linear => p / max,
            ColorScale::Log => ((p / max).log10() / LOG_DECADES + 1.0).max(0.0),
        }
    }
}

/// Colours of the scale at this many evenly spaced positions: a lookup per cell, as interpolating per
/// cell would dominate drawing.
const LUT_SIZE: usize = 1024;

fn lut() -> &'static [[u8; 4]; LUT_SIZE] {
    static LUT: std::sync::OnceLock<[[u8; 4]; LUT_SIZE]> = std::sync::OnceLock::new();
    LUT.get_or_init(|| {
        std::array::from_fn(|i| {
            let [r, g, b] = viridis(i as f32 / (LUT_SIZE - 1) as f32);
            [r, g, b, 255]
        })
    })
}

/// Opaque RGBA of probabilities under one scale and maximum (a heatmap's pixels).
#[derive(Clone, Copy, Debug)]
pub struct Painter {
    scale: ColorScale,
    max: f32,
    /// Linear scale: table index per unit of probability.
    per_unit: f32,
}

impl Painter {
    pub fn new(scale: ColorScale, max: f32) -> Self {
        let per_unit = if max > 0.0 { (LUT_SIZE - 1) as f32 / max } else { 0.0 };
        Self { scale, max, per_unit }
    }

    /// The table index of `p`: its position on the scale, rounded to the nearest of the table's steps.
    pub fn index(&self, p: f32) -> usize {
        let x = match self.scale {
            ColorScale::Linear => p * self.per_unit,
            ColorScale::Log => self.scale.position(p, self.max) * (LUT_SIZE - 1) as f32,
        };
        // `as` saturates: negative values and NaN give 0.
        ((x + 0.5) as usize).min(LUT_SIZE - 1)
    }

    pub fn rgba(&self, p: f32) -> &'static [u8; 4] {
        &lut()[self.index(p)]
    }

    /// [`Painter::rgba`] as one 32-bit word in memory order (a pixel written with one store).
    pub fn word(&self, p: f32) -> u32 {
        u32::from_ne_bytes(*self.rgba(p))
    }
}

impl std::str::FromStr for ColorScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "linear" => Ok(ColorScale::Linear),
            "log" => Ok(ColorScale::Log),
            _ => Err(format!("unknown colour scale \"{s}\" (expected linear or log)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_middle() {
        assert_eq!(viridis(0.0), [68, 1, 84]);
        assert_eq!(viridis(1.0), [253, 231, 37]);
        assert_eq!(viridis(0.5), [33, 144, 141]);
        assert_eq!(viridis(-3.0), viridis(0.0));
        assert_eq!(viridis(f32::NAN), viridis(0.0));
        // Halfway between stops 0 and 1: (68+71)/2 = 69.5 -> 70, (1+44)/2 = 22.5 -> 23, (84+122)/2 = 103.
        assert_eq!(viridis(0.0625), [70, 23, 103]);
    }

    #[test]
    fn painter_rounds_to_the_nearest_step() {
        let lin = Painter::new(ColorScale::Linear, 0.5);
        assert_eq!(
            (lin.index(0.0), lin.index(0.5), lin.index(0.25), lin.index(-1.0), lin.index(f32::NAN), lin.index(2.0)),
            (0, 1023, 512, 0, 0, 1023)
        );
        // 0.1 of 0.5 is position 0.2: 204.6 -> 205.
        assert_eq!(lin.index(0.1), 205);
        assert_eq!(lin.rgba(0.5), &[253, 231, 37, 255]);
        assert_eq!(lin.rgba(0.0), &[68, 1, 84, 255]);
        // Log: 1e-2 of the max is position 0.5 (511.5 -> 512); below four decades, 0.
        let log = Painter::new(ColorScale::Log, 0.5);
        assert_eq!((log.index(0.5), log.index(0.005), log.index(1e-9)), (1023, 512, 0));
        // Every probability lands within one step of its exact position on the scale.
        for i in 0..=1000 {
            let p = 0.5 * i as f32 / 1000.0;
            for (painter, scale) in [(lin, ColorScale::Linear), (log, ColorScale::Log)] {
                let exact = scale.position(p, 0.5) * 1023.0;
                assert!((painter.index(p) as f32 - exact).abs() <= 0.5 + 1e-3, "{scale:?} {p}");
            }
        }
        assert_eq!(Painter::new(ColorScale::Linear, 0.0).index(0.3), 0);
    }

    #[test]
    fn scales() {
        assert_eq!(ColorScale::Linear.position(0.25, 0.5), 0.5);
        assert_eq!(ColorScale::Log.position(0.5, 0.5), 1.0);
        // 1e-2 of the max is two of four decades down: position 0.5.
        assert!((ColorScale::Log.position(0.005, 0.5) - 0.5).abs() < 1e-6);
        assert_eq!(ColorScale::Log.position(1e-9, 0.5), 0.0);
        assert_eq!(ColorScale::Linear.position(0.0, 0.0), 0.0);
    }
}
