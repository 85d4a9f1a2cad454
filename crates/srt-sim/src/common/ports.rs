//! Binding the ports an engine plans, for real, so that collisions between co-located
//! processes surface as they would with the real engine: `address already in use` and the
//! port, exit code 1.

use std::fmt::Debug;
use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket};

use crate::SimError;

/// Why an engine binds a port: each engine has its own kinds.
pub trait Purpose: Debug + Clone + PartialEq {
    /// A short human description, e.g. `NIXL side channel (dp rank 2)`.
    fn describe(&self) -> String;
}

/// One port a process binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedListener<K> {
    /// Why.
    pub kind: K,
    /// Bind host (an IP or a resolvable name).
    pub host: String,
    /// Port.
    pub port: u16,
}

impl<K: Purpose> PlannedListener<K> {
    /// A short human description of why the port is bound.
    pub fn describe(&self) -> String {
        self.kind.describe()
    }
}

/// `base + offset`, or why it is past the last port.
pub(crate) fn offset_port(what: &str, base: u16, offset: u32) -> Result<u16, String> {
    u16::try_from(u32::from(base) + offset)
        .map_err(|_| format!("{what} port {base} + {offset} is beyond 65535"))
}

/// Resolves a bind host, preferring IPv4 for names (`localhost` → 127.0.0.1).
pub async fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {host}")))
}

fn bind_error<K: Purpose>(l: &PlannedListener<K>, e: io::Error) -> SimError {
    let detail = if e.kind() == io::ErrorKind::AddrInUse {
        "address already in use".to_string()
    } else {
        e.to_string()
    };
    SimError::Bind(format!(
        "cannot bind {} on {}:{}: {detail}",
        l.describe(),
        l.host,
        l.port
    ))
}

/// Binds the HTTP socket without listening, as vLLM's `setup_server` does before the engine
/// starts: a collision shows at once, while connections are refused until [`listen_http`].
pub async fn bind_http<K: Purpose>(l: &PlannedListener<K>) -> Result<TcpSocket, SimError> {
    let addr = resolve(&l.host, l.port)
        .await
        .map_err(|e| bind_error(l, e))?;
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|e| bind_error(l, e))?;
    sock.set_reuseaddr(true).map_err(|e| bind_error(l, e))?;
    sock.bind(addr).map_err(|e| bind_error(l, e))?;
    Ok(sock)
}

/// Starts listening on a socket from [`bind_http`].
pub fn listen_http<K: Purpose>(
    l: &PlannedListener<K>,
    sock: TcpSocket,
) -> Result<TcpListener, SimError> {
    sock.listen(1024).map_err(|e| bind_error(l, e))
}

/// Binds and listens at once (side channels, rendezvous and RPC ports, servers that are up
/// from the start).
pub async fn bind_listener<K: Purpose>(l: &PlannedListener<K>) -> Result<TcpListener, SimError> {
    let addr = resolve(&l.host, l.port)
        .await
        .map_err(|e| bind_error(l, e))?;
    TcpListener::bind(addr).await.map_err(|e| bind_error(l, e))
}

/// Accepts connections forever; each peer gets `greeting` (if any) and is then closed.
pub async fn serve_listener(listener: TcpListener, greeting: Option<String>) {
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
                let greeting = greeting.clone();
                tokio::spawn(async move {
                    if let Some(g) = greeting {
                        let _ = stream.write_all(g.as_bytes()).await;
                    }
                    let _ = stream.shutdown().await;
                });
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// `host:port` for the log line naming what a process bound.
pub(crate) fn describe_bound<K: Purpose>(bound: &[PlannedListener<K>]) -> String {
    if bound.is_empty() {
        return "nothing".into();
    }
    bound
        .iter()
        .map(|l| format!("{} {}:{}", l.describe(), l.host, l.port))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Test;

    impl Purpose for Test {
        fn describe(&self) -> String {
            "test port".into()
        }
    }

    #[tokio::test]
    async fn collisions_are_reported() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let l = PlannedListener {
            kind: Test,
            host: "127.0.0.1".into(),
            port,
        };
        let err = bind_listener(&l).await.unwrap_err().to_string();
        assert!(err.contains("address already in use"), "{err}");
        assert!(err.contains(&port.to_string()), "{err}");
        assert!(err.contains("test port"), "{err}");
        let err = bind_http(&l).await.unwrap_err().to_string();
        assert!(err.contains("address already in use"), "{err}");
    }

    #[tokio::test]
    async fn http_refuses_until_listening() {
        let l = PlannedListener {
            kind: Test,
            host: "127.0.0.1".into(),
            port: 0,
        };
        let sock = bind_http(&l).await.unwrap();
        let addr = sock.local_addr().unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        let listener = listen_http(&l, sock).unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
        accept.await.unwrap().unwrap();
    }
}
