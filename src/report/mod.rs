//! Output for people and CI: JUnit XML ([`junit`]) and the self-contained HTML page with
//! its SVG sequence diagrams ([`html`]); [`markup`] escapes every text for both.

pub(crate) mod cells;
pub(crate) mod html;
pub mod junit;
pub(crate) mod markup;
pub(crate) mod results;
pub(crate) mod templates;
pub use cells::{CellView, cell_views, cells_section, cells_table, representative_rows, stopped_at};
pub use html::{
    Diagram, ReportOptions, RunContext, draw, figure, html, html_with, multi_diagram, row_diagram, run_page,
    sequence_svg, single_diagram,
};
pub use results::results_page;
pub use templates::templates_section;
