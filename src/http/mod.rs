//! The HTTPS shell: the admission API, the admin port, the server loop, TLS and certs.

pub mod admin;
pub mod api;
pub mod certs;
pub mod server;
pub mod tls;
