//! What every Linux device with a virtio-net header shares on transmit.

use vsw_datapath::{PacketMeta, StageError, TxOffloads};
use vsw_packet::ethernet::copy_frame;
use vsw_packet::vnet::VNET_HDR_LEN;

/// The kernel finishes checksums and segments super-frames when the virtio-net header
/// goes with every frame; the interface's MTU limits the rest.
pub(crate) fn kernel_offloads(mtu: usize) -> TxOffloads {
    TxOffloads {
        csum: true,
        tso: true,
        merges: true,
        tunnel_tso: false,
        mtu,
    }
}

/// Writes the virtio-net header and the frame (a tag the receiving device stripped put
/// back, the header's offsets moved for it) into `buf`; returns the bytes written.
pub(crate) fn put_vnet_frame(
    buf: &mut [u8],
    data: &[u8],
    meta: &PacketMeta,
) -> Result<usize, StageError> {
    if buf.len() < VNET_HDR_LEN {
        return Err(StageError::TooBig);
    }
    let (hdr, frame) = buf.split_at_mut(VNET_HDR_LEN);
    let vnet = match meta.vlan {
        Some(_) => meta.vnet.shifted(4),
        None => meta.vnet,
    };
    vnet.write(hdr.try_into().map_err(|_| StageError::TooBig)?);
    let len = copy_frame(frame, data, meta.vlan).ok_or(StageError::TooBig)?;
    Ok(VNET_HDR_LEN + len)
}
