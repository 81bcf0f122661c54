//! When a request's bytes reached the server's socket, from the kernel (SO_TIMESTAMPING's
//! software receive stamp), so that the bench server's own delay in reading a request is
//! counted as the server's time, not the client's.

use std::io;
use std::os::fd::AsRawFd;
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Ask the kernel to stamp this socket's received packets; false where it will not.
pub fn enable(sock: &TcpStream) -> bool {
    let flags =
        (libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE) as libc::c_int;
    // SAFETY: a valid socket descriptor and a c_int option of the stated size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            (&raw const flags).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Read what is there: the byte count, and the receive time (ns since the Unix epoch) of
/// the last packet read, when the kernel gave one.
pub async fn read(sock: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    loop {
        sock.readable().await?;
        match sock.try_io(Interest::READABLE, || recv(sock.as_raw_fd(), buf)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

fn recv(fd: i32, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    // SAFETY: `msg` describes live buffers of the stated sizes.
    let n = unsafe { libc::recvmsg(fd, &raw mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
                let ts = libc::CMSG_DATA(c).cast::<libc::timespec>().read_unaligned();
                if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    Ok((n as usize, stamp))
}
