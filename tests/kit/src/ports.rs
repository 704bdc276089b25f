//! Ports for the servers the tests start.
//!
//! Taken below the kernel's ephemeral range (`ip_local_port_range`, 32768 and up by
//! default) and above Ray's worker ports (10002-19999): an outgoing connection of any
//! process, or a Ray worker, cannot take one between this check and the child's bind, which
//! `bind("127.0.0.1:0")` could not promise (an API-server client took such a port once in
//! CI). Each test process starts at its own offset and never hands a port out twice.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

const FIRST: u32 = 20_000;
const SPAN: u32 = 12_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A port on 127.0.0.1 that nothing listens on now.
pub fn free_port() -> u16 {
    let offset = std::process::id().wrapping_mul(7_919) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(FIRST + (offset + n) % SPAN).expect("below 65536");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN);
}
