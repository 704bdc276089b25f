//! The HTTPS shell: the admission API, the admin port, the server loop, TLS and certs.

pub(crate) mod admin;
pub(crate) mod api;
pub mod certs;
pub mod client_names;
pub mod server;
pub mod tls;
