//! [`BoxFuture`]: what the crate's async traits return. It sits in the lowest layer
//! because tools, model clients, the gate and the store all name it.

/// A boxed, sendable future: what the crate's async traits return (model clients,
/// deciders, tools that answer later).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
