//! Output for people and CI: JUnit XML ([`junit`]) and the self-contained HTML page with
//! its SVG sequence diagrams ([`html`]); [`markup`] escapes every text for both.

pub(crate) mod html;
pub mod junit;
pub(crate) mod markup;
pub use html::{html, sequence_svg};
