//! Hand-written SVG charts: a chart is plain data (series of points with spread, dashed
//! fitted curves) and `Chart::to_svg` turns it into markup with stable classes and `data-*`
//! attributes, so tests can read the picture back structurally.

pub mod figures;
pub mod format;
pub mod scale;
mod svg;

pub use format::Unit;
pub use scale::{Scale, ScaleKind};

/// One measured point: the median, optionally its p10–p90 spread, and a tooltip.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// p10–p90 (or another spread), drawn as an error bar.
    pub spread: Option<(f64, f64)>,
    /// Tooltip text (plain; escaped when drawn).
    pub tip: String,
}

/// Points joined by a line, with circles at the points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Stable key, written as `data-series` (e.g. `ttft`).
    pub key: String,
    /// Legend text.
    pub label: String,
    /// Index into the palette.
    pub color: usize,
    pub points: Vec<Point>,
}

/// A curve without markers (a fitted model, a reference line), drawn dashed.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub key: String,
    pub label: String,
    pub color: usize,
    pub points: Vec<(f64, f64)>,
}

/// A shaded band between two curves (a prediction interval), drawn under the series.
#[derive(Debug, Clone, PartialEq)]
pub struct Shade {
    pub key: String,
    pub label: String,
    pub color: usize,
    /// (x, lo, hi), in x order.
    pub points: Vec<(f64, f64, f64)>,
}

/// Everything one chart shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Stable id, written as `id="chart-{id}"` and `data-chart`.
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: ScaleKind,
    pub y_scale: ScaleKind,
    pub x_unit: Unit,
    pub y_unit: Unit,
    /// Extend a linear y axis to 0.
    pub y_zero: bool,
    pub series: Vec<Series>,
    pub curves: Vec<Curve>,
    pub shades: Vec<Shade>,
    /// Shown instead of an empty plot area.
    pub empty_text: String,
}

impl Chart {
    /// A chart on linear axes (y from 0), with no data yet; `empty_text` is shown while it
    /// has none.
    pub fn linear(
        id: &str,
        title: &str,
        axes: (&str, &str),
        units: (Unit, Unit),
        empty_text: &str,
    ) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x_label: axes.0.into(),
            y_label: axes.1.into(),
            x_scale: ScaleKind::Linear,
            y_scale: ScaleKind::Linear,
            x_unit: units.0,
            y_unit: units.1,
            y_zero: true,
            series: Vec::new(),
            curves: Vec::new(),
            shades: Vec::new(),
            empty_text: empty_text.into(),
        }
    }

    /// A log-x chart of context length against a metric, with no data yet.
    pub fn versus_context(
        id: &str,
        title: &str,
        y_label: &str,
        y_scale: ScaleKind,
        y_unit: Unit,
    ) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x_label: "context (tokens)".into(),
            y_label: y_label.into(),
            x_scale: ScaleKind::Log2,
            y_scale,
            x_unit: Unit::Tokens,
            y_unit,
            y_zero: !y_scale.is_log(),
            series: Vec::new(),
            curves: Vec::new(),
            shades: Vec::new(),
            empty_text: "no valid samples yet".into(),
        }
    }

    /// Whether any series has a point to draw.
    pub fn has_points(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// The chart as a standalone `<svg>` element.
    pub fn to_svg(&self) -> String {
        svg::render(self)
    }
}

/// Series colours, picked by `Series::color` (colour-blind-safe, Okabe–Ito).
pub const PALETTE: [&str; 6] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
];

pub(crate) fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}
