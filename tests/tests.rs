//! The integration tests: one target, a module per area.

mod util;

mod single_loop;
mod single_memory;
mod single_parsers;
mod single_state;
mod single_table;

mod multi_actors;
mod multi_parsers;
mod multi_table;
