//! IP fragments through a `ct` in the whole datapath: kept until their datagram is
//! whole, then each sent on once; a `ct` in a copy (a clone) keeps the copy only,
//! the packet itself goes on.

mod common;

use common::*;

/// A UDP datagram of 3,000 bytes from host 1 to host 2 (id 99), as the three
/// fragments a 1,500-byte MTU makes of it.
fn fragments() -> Vec<Vec<u8>> {
    let whole = frame(1, mac(2), 53);
    let mut whole = whole[..14 + 20].to_vec();
    let udp_len = 3000u16;
    let mut udp = vec![0u8; usize::from(udp_len)];
    udp[0..2].copy_from_slice(&1000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&53u16.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    for (i, b) in udp[8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    whole.extend_from_slice(&udp);
    let payload = &whole[34..];
    payload
        .chunks(1480)
        .enumerate()
        .map(|(i, part)| {
            let mut f = whole[..34].to_vec();
            let more = (i + 1) * 1480 < payload.len();
            let off_m = (i * 1480 / 8) as u16 | if more { 0x2000 } else { 0 };
            f[14 + 2..14 + 4].copy_from_slice(&((20 + part.len()) as u16).to_be_bytes());
            f[14 + 4..14 + 6].copy_from_slice(&99u16.to_be_bytes());
            f[14 + 6..14 + 8].copy_from_slice(&off_m.to_be_bytes());
            f[14 + 10..14 + 12].fill(0);
            let mut sum: u32 = f[14..34]
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            f[14 + 10..14 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            f.extend_from_slice(part);
            f
        })
        .collect()
}

#[test]
fn fragments_in_a_clone_wait_there_while_each_goes_on_outside_it() {
    let mut sw = switch(3);
    let _rules = rules(
        &mut sw.dp,
        &["priority=10,in_port=1,ip,actions=clone(ct(commit,zone=1),output:2),output:3"],
    );
    let frags = fragments();
    assert_eq!(frags.len(), 3);
    // The first two: out of port 3 each (outside the clone), held in the clone.
    for f in &frags[..2] {
        sw.peers[0].send(f);
    }
    eventually("the first fragments out of port 3", || {
        sw.peers[2].try_recv().is_some() && sw.peers[2].try_recv().is_some()
    });
    assert!(
        drain(&sw.peers[1]).is_empty(),
        "port 2 before the datagram was whole"
    );
    // The last: the clone's output sends all three, once each, in order; port 3
    // gets the last one itself.
    sw.peers[0].send(&frags[2]);
    let out2: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            sw.peers[1]
                .recv_timeout(std::time::Duration::from_secs(5))
                .expect("a fragment out of port 2")
        })
        .collect();
    assert_eq!(out2, frags);
    assert_eq!(drain(&sw.peers[2]), vec![frags[2].clone()]);
    assert!(drain(&sw.peers[1]).is_empty(), "a fragment sent twice");
}

/// A UDP datagram of 3,000 bytes from 2001:db8::1 to 2001:db8::2 (id 7), as the
/// three fragments a 1,500-byte MTU makes of it (a fragment header each).
fn ipv6_fragments() -> Vec<Vec<u8>> {
    let mut eth = mac(2).to_vec();
    eth.extend_from_slice(&mac(1));
    eth.extend_from_slice(&0x86ddu16.to_be_bytes());
    let mut udp = vec![0u8; 3000];
    udp[0..2].copy_from_slice(&1000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&53u16.to_be_bytes());
    udp[4..6].copy_from_slice(&3000u16.to_be_bytes());
    for (i, b) in udp[8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let addr = |last: u8| {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        a[15] = last;
        a
    };
    udp.chunks(1448)
        .enumerate()
        .map(|(i, part)| {
            let mut f = eth.clone();
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&((8 + part.len()) as u16).to_be_bytes());
            f.extend_from_slice(&[44, 64]);
            f.extend_from_slice(&addr(1));
            f.extend_from_slice(&addr(2));
            let more = (i + 1) * 1448 < udp.len();
            let off_m = (i * 1448) as u16 | u16::from(more);
            f.extend_from_slice(&[17, 0]);
            f.extend_from_slice(&off_m.to_be_bytes());
            f.extend_from_slice(&7u32.to_be_bytes());
            f.extend_from_slice(part);
            f
        })
        .collect()
}

/// IPv6 fragments, last first: kept until the datagram is whole, then tracked and
/// committed as one connection, and all three sent on once each, in order; a
/// fragment of another datagram alone stays kept.
#[test]
fn ipv6_fragments_in_any_order_go_on_once_their_datagram_is_whole() {
    let mut sw = switch(2);
    let _rules = rules(
        &mut sw.dp,
        &["priority=10,in_port=1,ipv6,actions=ct(commit,zone=1),output:2"],
    );
    let frags = ipv6_fragments();
    assert_eq!(frags.len(), 3);
    for f in frags.iter().rev() {
        sw.peers[0].send(f);
    }
    let out: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            sw.peers[1]
                .recv_timeout(std::time::Duration::from_secs(5))
                .expect("a fragment out of port 2")
        })
        .collect();
    assert_eq!(out, frags);
    assert!(drain(&sw.peers[1]).is_empty(), "a fragment sent twice");
    let dump = sw
        .dp
        .conntrack()
        .connections(Some(1), vsw_datapath::clock::now_ms());
    assert_eq!(dump.len(), 1, "the datagram's connection: {dump:?}");
    assert_eq!(dump[0].orig.dst_port, 53);
    // The first fragment of another datagram: kept, nothing out.
    let mut other = frags[0].clone();
    other[14 + 40 + 4..14 + 40 + 8].copy_from_slice(&8u32.to_be_bytes());
    sw.peers[0].send(&other);
    assert!(drain(&sw.peers[1]).is_empty());
    assert_eq!(sw.dp.conntrack().ipf().nfrag(), 1);
}
