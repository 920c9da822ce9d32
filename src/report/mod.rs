//! Output for people and CI: JUnit XML ([`junit`]) and the self-contained HTML page with
//! its SVG sequence diagrams ([`html`]); [`markup`] escapes every text for both.

pub mod html;
pub mod junit;
pub mod markup;
