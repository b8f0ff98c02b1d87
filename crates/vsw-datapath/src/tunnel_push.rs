//! What `DpAction::TunnelPush(i)` puts in front of a packet: header `i` of the
//! flow's own (`DpFlow::headers`, `Translation::headers`). A datapath action stays
//! a small copyable value; the header lives as long as the flows that push it, and
//! a PMD reaches it through the flow it runs, with no table and no lock between. The
//! revalidator compares a flow's headers as it compares its actions: a next hop's
//! new MAC retires the flows that pushed the old one.

use vsw_packet::tunnel::EncapTemplate;

/// One header: the outer headers, and the tunnel port it is sent by (whose
/// counters count its packets, and whose queue takes a packet the header cannot).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PushHeader {
    pub template: EncapTemplate,
    pub tunnel_port: u32,
}
