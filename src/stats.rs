//! Pure statistics: medians, spread, outliers, least-squares fits.
