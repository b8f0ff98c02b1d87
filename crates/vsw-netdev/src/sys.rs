//! Thin safe wrappers over the system calls AF_PACKET ports use.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

pub const TPACKET_V2: libc::c_int = 1;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A non-blocking AF_PACKET raw socket that receives nothing until it is bound.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; protocol 0 keeps the socket silent until bind().
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(SOL_PACKET, opt)` with a plain-old-data value.
pub fn set_packet_opt<T: Copy>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed; the kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Frames the kernel counted since the last call (`PACKET_STATISTICS` resets on read):
/// (received, dropped).
pub fn packet_statistics(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let mut st = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: `st` and `len` are live and sized for the kernel to write into.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    })?;
    Ok((u64::from(st.tp_packets), u64::from(st.tp_drops)))
}

/// Binds the socket to one interface: receiving every protocol (`receive`), or
/// nothing (a socket that only sends).
pub fn bind_to_interface(fd: &OwnedFd, ifindex: u32, receive: bool) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = if receive {
        (libc::ETH_P_ALL as u16).to_be()
    } else {
        0
    };
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a live sockaddr_ll and its size is passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Puts the interface in promiscuous mode for as long as the socket is open: the
/// kernel drops the membership, and restores the interface, when the socket closes.
pub fn add_promiscuous_membership(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex as i32,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    set_packet_opt(fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// Asks the kernel to send the frames marked in the TX ring; never blocks.
pub fn kick_tx(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer: the kernel reads the TX ring instead.
    let ret = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The index of the interface named `name`, if there is one.
pub fn if_index(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

/// An `ifreq` naming interface `name` (at most 15 bytes, checked).
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('\0') {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

/// A datagram socket to ask the kernel about interfaces with.
fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked and owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The MTU of interface `name`.
pub fn interface_mtu(name: &str) -> io::Result<u32> {
    let mut req = ifreq(name)?;
    let sock = control_socket()?;
    // SAFETY: SIOCGIFMTU reads the name from and writes the MTU into `req`, which
    // lives for the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after SIOCGIFMTU the union holds the MTU.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// Sets the MTU of interface `name`; the kernel's error when it refuses.
pub fn set_interface_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu =
        libc::c_int::try_from(mtu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let sock = control_socket()?;
    // SAFETY: SIOCSIFMTU reads name and MTU from `req`, which lives for the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFMTU, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Creates tap interface `name` (or attaches to it) with virtio-net headers, and
/// tells the kernel which offloads the reader takes (`offloads`: TUN_F_* flags).
pub fn tap_open(name: &str, offloads: libc::c_uint) -> io::Result<OwnedFd> {
    tap_open_with(name, 10, offloads)
}

/// [`tap_open`] with virtio-net headers of `hdr_len` bytes (24: the header with UDP
/// tunnel offsets).
pub fn tap_open_with(
    name: &str,
    hdr_len: libc::c_int,
    offloads: libc::c_uint,
) -> io::Result<OwnedFd> {
    let mut req = ifreq(name)?;
    // SAFETY: plain open(2) of a NUL-terminated literal; the result is checked.
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: raw is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    req.ifr_ifru.ifru_flags =
        (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
    // SAFETY: TUNSETIFF reads the name and flags from `req`, which lives for the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) })?;
    // SAFETY: TUNSETVNETHDRSZ reads one c_int from the pointer, which lives for the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETVNETHDRSZ, &hdr_len) })?;
    // SAFETY: TUNSETOFFLOAD takes the flags by value.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            offloads as libc::c_ulong,
        )
    })?;
    Ok(fd)
}

/// Sets interface `name` up.
pub fn set_link_up(name: &str) -> io::Result<()> {
    set_link_admin(name, true)
}

/// Sets interface `name` administratively up or down (IFF_UP).
pub fn set_link_admin(name: &str, up: bool) -> io::Result<()> {
    let mut req = ifreq(name)?;
    let sock = control_socket()?;
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: after SIOCGIFFLAGS the union holds the flags.
    unsafe {
        if up {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        } else {
            req.ifr_ifru.ifru_flags &= !(libc::IFF_UP as libc::c_short);
        }
    }
    // SAFETY: SIOCSIFFLAGS reads name and flags from `req`, which lives for the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) }).map(|_| ())
}

/// A second descriptor for the same open file (another PMD's transmit queue on a tap).
pub fn dup(fd: &OwnedFd) -> io::Result<OwnedFd> {
    fd.try_clone()
}

/// Reads one frame from a non-blocking descriptor (a tap); `Ok(None)` when none waits.
pub fn read_frame(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is live and writable for its whole length for the call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    nonblocking(n)
}

/// Writes one frame to a descriptor (a tap) from one buffer.
pub fn write_frame(fd: &OwnedFd, frame: &[u8]) -> io::Result<()> {
    // SAFETY: `frame` is live and readable for its whole length for the call.
    let n = unsafe { libc::write(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A header and a frame as the two parts of one write or send (the kernel only reads
/// them; the caller keeps both alive for the call).
fn two_parts(head: &[u8], data: &[u8]) -> [libc::iovec; 2] {
    [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        },
    ]
}

/// Writes one frame to a descriptor (a tap) from two buffers: a header and the frame.
pub fn write_frame_parts(fd: &OwnedFd, head: &[u8], data: &[u8]) -> io::Result<()> {
    let iov = two_parts(head, data);
    // SAFETY: both parts are live and readable for the call; the kernel only reads them.
    let n = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A shared memory mapping of a socket's rings, unmapped on drop.
pub struct RingMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; which thread touches it
// is decided by the ring protocol (frame status words), not by thread identity.
unsafe impl Send for RingMap {}
// SAFETY: as above; concurrent access goes through atomic status words.
unsafe impl Sync for RingMap {}

impl RingMap {
    pub fn map(fd: &OwnedFd, len: usize) -> io::Result<RingMap> {
        // SAFETY: maps `len` bytes of the socket's rings; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(RingMap { base, len })
    }

    /// A pointer to `[offset, offset + len)`, which must lie inside the mapping
    /// (checked: a bad offset is a bug, and stops the program rather than touch
    /// memory elsewhere).
    fn range(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "bytes {offset}..+{len} outside ring of {}",
            self.len
        );
        // SAFETY: offset is inside the mapping (checked above).
        unsafe { self.base.as_ptr().add(offset) }
    }

    /// The status word at `offset` (4-byte aligned), through which this side and the
    /// kernel hand a frame or block to each other: always read and written
    /// atomically, so no ownership is needed to use it.
    pub fn status(&self, offset: usize) -> &AtomicU32 {
        let p = self.range(offset, 4);
        assert!(
            p.align_offset(4) == 0,
            "status word at {offset} not aligned"
        );
        // SAFETY: four aligned bytes inside the mapping, which lives as long as
        // `self`; shared with the kernel, hence accessed only atomically.
        unsafe { &*(p as *const AtomicU32) }
    }

    /// Copies out a plain value at `offset`.
    ///
    /// # Safety
    /// The bytes belong to this side now (a status word said so): the kernel does
    /// not write them while they are read.
    pub unsafe fn read<T: Plain>(&self, offset: usize) -> T {
        let p = self.range(offset, size_of::<T>());
        // SAFETY: inside the mapping (checked), owned by this side (the caller's
        // promise); any bytes are a valid `T` (Plain); unaligned read.
        unsafe { std::ptr::read_unaligned(p as *const T) }
    }

    /// Writes a `u32` at `offset`.
    ///
    /// # Safety
    /// As for [`RingMap::read`], and no slice of these bytes is alive.
    pub unsafe fn write_u32(&self, offset: usize, value: u32) {
        let p = self.range(offset, 4);
        // SAFETY: inside the mapping (checked), owned by this side (the caller's
        // promise); unaligned write.
        unsafe { std::ptr::write_unaligned(p as *mut u32, value) }
    }

    /// The bytes `[offset, offset + len)`.
    ///
    /// # Safety
    /// They belong to this side (a status word said so) for as long as the slice
    /// lives: the caller hands them back to the kernel only after it is gone, and
    /// holds no mutable slice over them meanwhile.
    pub unsafe fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        let p = self.range(offset, len);
        // SAFETY: inside the mapping (checked) and owned by this side for the
        // slice's life (the caller's promise).
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// The bytes `[offset, offset + len)`, to write.
    ///
    /// # Safety
    /// As for [`RingMap::bytes`], and no other slice of them is alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        let p = self.range(offset, len);
        // SAFETY: inside the mapping (checked), owned by this side and not aliased
        // for the slice's life (the caller's promise).
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }
}

/// Plain values a ring holds, which any bytes make valid: integers and the kernel's
/// frame headers.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes is a valid `Self`.
pub unsafe trait Plain: Copy {}
// SAFETY: integers: any bits are valid.
unsafe impl Plain for u16 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: a C struct of integers only.
unsafe impl Plain for libc::tpacket2_hdr {}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what map() mapped; nothing borrows it any more
        // (borrows of frames end before the owning queue can be dropped).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Sets the socket's receive and send buffer sizes, beyond the system maximum when
/// the process may (root): a burst the PMD has not read yet waits there.
pub fn set_socket_buffers(fd: &OwnedFd, rcv: usize, snd: usize) -> io::Result<()> {
    for (force, plain, size) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, rcv),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, snd),
    ] {
        let v = size as libc::c_int;
        let set = |opt| {
            // SAFETY: `v` is a live c_int and its size is passed; the kernel only reads it.
            check(unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&v as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            })
        };
        if set(force).is_err() {
            set(plain)?;
        }
    }
    Ok(())
}

/// The result of a non-blocking read or receive: `Ok(None)` when nothing waited.
fn nonblocking(n: isize) -> io::Result<Option<usize>> {
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(None)
    } else {
        Err(e)
    }
}

/// The PACKET_AUXDATA control message of a received message (`msg` as `recvmsg` or
/// `recvmmsg` filled it), if the kernel wrote one.
pub fn packet_auxdata(msg: &libc::msghdr) -> Option<libc::tpacket_auxdata> {
    // SAFETY: `msg` was filled by the kernel with msg_control pointing at a live control
    // buffer and msg_controllen saying how much of it was written; the CMSG_* macros
    // stay inside that length, and the data is copied out unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET
                && (*c).cmsg_type == libc::PACKET_AUXDATA
                && (*c).cmsg_len as usize
                    >= libc::CMSG_LEN(size_of::<libc::tpacket_auxdata>() as u32) as usize
            {
                return Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c) as *const libc::tpacket_auxdata
                ));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
        None
    }
}

/// Room for one PACKET_AUXDATA control message, aligned for `cmsghdr`.
pub type AuxBuffer = [u64; 8];

/// Receives one queued frame into `buf` without blocking, with the kernel's
/// PACKET_AUXDATA (the socket must have the option on): `Ok(None)` when none is
/// queued; the length is the frame's full length (larger than `buf` if it was cut).
pub fn recv_frame_aux(
    fd: &OwnedFd,
    buf: &mut [u8],
) -> io::Result<Option<(usize, Option<libc::tpacket_auxdata>)>> {
    let mut ctrl: AuxBuffer = [0; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<AuxBuffer>();
    // SAFETY: the buffer and the control buffer are live and writable for their whole
    // lengths for the call.
    let n = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    Ok(nonblocking(n)?.map(|n| (n, packet_auxdata(&msg))))
}

/// Sends one frame, given as two parts (header and data), without blocking.
pub fn send_frame(fd: &OwnedFd, head: &[u8], data: &[u8]) -> io::Result<()> {
    let mut iov = two_parts(head, data);
    // SAFETY: msghdr is plain old data; zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len();
    // SAFETY: both parts are live and readable for the call; the kernel only reads them.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes a POSIX (fcntl) write lock on the whole of `file`, held until the process
/// ends: what Open vSwitch's tools read (F_GETLK) to tell a live daemon's pid file.
pub fn lock_whole_file(file: &std::fs::File) -> io::Result<()> {
    // SAFETY: flock is plain old data; all-zero is a valid start.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: the descriptor is open for the call; `fl` is a live flock struct.
    check(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &fl) }).map(|_| ())
}

/// Restricts the calling thread (and threads it starts later) to `cpus`.
pub fn set_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: `c` is below CPU_SETSIZE, inside the set.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is this thread.
    check(unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) }).map(|_| ())
}

/// Moves the calling thread into the network namespace at `path` (/run/netns/NAME).
/// Sockets it opens afterwards belong to that namespace, and keep belonging to it.
pub fn enter_netns(path: &std::path::Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: `f` is an open namespace file for the duration of the call.
    check(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }).map(|_| ())
}

/// Sets the soft limit of open files to the hard limit; returns it.
pub fn raise_open_file_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit the kernel writes into.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: `lim` is a live rlimit the kernel reads.
    check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    Ok(lim.rlim_cur)
}

/// The id of the group named `name` (through NSS, as `getent group` sees it);
/// `Ok(None)` when there is no such group.
pub fn group_id(name: &str) -> io::Result<Option<u32>> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: group is plain old data; all-zero is a valid value.
        let mut group: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is to a live value of the right type and `buf`'s length
        // is passed; the strings the result points to live in `buf`, and only the gid
        // (a copy) is used.
        let r = unsafe {
            libc::getgrnam_r(
                c.as_ptr(),
                &mut group,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match r {
            0 if found.is_null() => return Ok(None),
            0 => return Ok(Some(group.gr_gid)),
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// Whether `fd` is an eventfd (as `/proc/self/fd` names it).
pub fn is_eventfd(fd: &impl AsRawFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .is_ok_and(|p| p.as_os_str() == "anon_inode:[eventfd]")
}

/// Makes reads and writes on `fd` fail with EAGAIN instead of waiting.
pub fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller holds open; F_GETFL takes no argument.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above; F_SETFL takes the flags as an int.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) })
        .map(|_| ())
}

/// The most frames one `recvmmsg`/`sendmmsg` call here moves.
pub const MAX_MMSG: usize = 64;

/// One frame `recv_frames` received: its full length (with the virtio-net header),
/// whether it was cut to fit its buffer, and the kernel's PACKET_AUXDATA.
#[derive(Clone, Copy, Default)]
pub struct Received {
    pub len: usize,
    pub truncated: bool,
    pub aux: Option<libc::tpacket_auxdata>,
}

/// Receives up to `min(bufs.len(), ctrl.len(), out.len(), MAX_MMSG)` frames with one
/// `recvmmsg`, without blocking: frame `i` into `bufs[i]` (its control data into
/// `ctrl[i]`), described by `out[i]`. Returns how many came (0 when none waited).
pub fn recv_frames(
    fd: &OwnedFd,
    bufs: &mut [Box<[u8]>],
    ctrl: &mut [AuxBuffer],
    out: &mut [Received],
) -> usize {
    let want = bufs.len().min(ctrl.len()).min(out.len()).min(MAX_MMSG);
    // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value.
    let mut iov: [libc::iovec; MAX_MMSG] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; MAX_MMSG] = unsafe { std::mem::zeroed() };
    for (i, (buf, c)) in bufs.iter_mut().zip(ctrl.iter_mut()).take(want).enumerate() {
        iov[i].iov_base = buf.as_mut_ptr().cast();
        iov[i].iov_len = buf.len();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = c.as_mut_ptr().cast();
        msgs[i].msg_hdr.msg_controllen = size_of::<AuxBuffer>();
    }
    // SAFETY: messages 0..want each point at a buffer and a control buffer of the
    // lengths given, borrowed mutably for the call.
    let n = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            want as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    let n = usize::try_from(n).unwrap_or(0);
    for (o, msg) in out.iter_mut().zip(&msgs).take(n) {
        *o = Received {
            len: msg.msg_len as usize,
            truncated: msg.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            aux: packet_auxdata(&msg.msg_hdr),
        };
    }
    n
}

/// Sends `frames` (at most `MAX_MMSG`) with one `sendmmsg`, without blocking; how
/// many the kernel took (the first n), or its error when it took none.
pub fn send_frames(fd: &OwnedFd, frames: &[&[u8]]) -> io::Result<usize> {
    let n = frames.len().min(MAX_MMSG);
    // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value.
    let mut iov: [libc::iovec; MAX_MMSG] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; MAX_MMSG] = unsafe { std::mem::zeroed() };
    for (i, f) in frames.iter().take(n).enumerate() {
        iov[i].iov_base = f.as_ptr() as *mut libc::c_void;
        iov[i].iov_len = f.len();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: messages 0..n each point at a frame borrowed for the call; the kernel
    // only reads them.
    let r = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// A signal handler that takes the signal's details (SA_SIGINFO).
pub type SignalHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for `sig` (on the thread's alternate stack where it has one);
/// returns the disposition it replaces.
pub fn install_signal_handler(
    sig: libc::c_int,
    handler: SignalHandler,
) -> io::Result<libc::sigaction> {
    // SAFETY: sigaction is plain old data; all-zero is a valid (empty) value.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `action.sa_mask` is a live sigset_t to empty.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: as above.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both point at live sigaction values; the handler is the caller's, which
    // promises it is async-signal-safe.
    check(unsafe { libc::sigaction(sig, &action, &mut previous) })?;
    Ok(previous)
}

/// Puts the default disposition back for `sig` (from a signal handler too).
pub fn default_signal_action(sig: libc::c_int) {
    // SAFETY: sigaction is plain old data; zero with SIG_DFL is the default action.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: a valid disposition; sigaction is async-signal-safe.
    unsafe { libc::sigaction(sig, &dfl, std::ptr::null_mut()) };
}

/// Replaces the pages of [start, start + len) with zeroed anonymous ones, in place
/// (from a signal handler too: mmap is a plain system call); whether it worked.
///
/// # Safety
/// The range must be a mapping the caller owns, whose contents may be thrown away:
/// whatever pointed into it reads zeros from now on.
pub unsafe fn replace_with_zero_pages(start: usize, len: usize) -> bool {
    // SAFETY: the caller owns the range (above); MAP_FIXED replaces exactly it.
    let p = unsafe {
        libc::mmap(
            start as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    p != libc::MAP_FAILED
}

/// Whether `path` is on a BPF filesystem (bpffs), where BPF objects can be pinned.
pub fn is_bpffs(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `st` a buffer of the size statfs fills.
    let r = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    if r != 0 {
        return false;
    }
    // SAFETY: statfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    const BPF_FS_MAGIC: libc::c_long = 0xcafe_4a11;
    st.f_type as libc::c_long == BPF_FS_MAGIC
}

/// `bpf(2)` commands used outside aya: aya has no call that detaches a link
/// (BPF_LINK_DETACH), and a pinned link released by unlinking its file lets go of the
/// program only later, after an RCU grace period and a work item, so "the earlier
/// run's classifier is gone" would not hold when the caller goes on.
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_LINK_DETACH: libc::c_long = 34;

/// The `bpf_attr` fields of BPF_OBJ_GET (the kernel zeroes what is not passed).
#[repr(C)]
struct BpfObjGet {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

/// Detaches the BPF link pinned at `path` from what it is attached to, at once and
/// whoever else holds it: its program stops running before this returns. The pin
/// itself stays (the caller removes it).
pub fn detach_pinned_bpf_link(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let get = BpfObjGet {
        pathname: c.as_ptr() as u64,
        bpf_fd: 0,
        file_flags: 0,
    };
    // SAFETY: `get` is a live bpf_attr prefix of the size passed, and its pathname
    // points to `c`, a NUL-terminated string alive for the call; the kernel only reads.
    let raw = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET,
            &get as *const BpfObjGet,
            size_of::<BpfObjGet>() as libc::c_uint,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: BPF_OBJ_GET returned a fresh descriptor nobody else owns.
    let link = unsafe { OwnedFd::from_raw_fd(raw as libc::c_int) };
    let detach: u32 = link.as_raw_fd() as u32;
    // SAFETY: the attr is one u32 (link_detach.link_fd), live for the call and of the
    // size passed; the kernel only reads it. Not a link: the kernel says EINVAL.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_DETACH,
            &detach as *const u32,
            size_of::<u32>() as libc::c_uint,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
