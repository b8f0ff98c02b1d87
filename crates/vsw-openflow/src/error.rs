//! Why a request is refused, as the OpenFlow error (type, code) it is answered
//! with. Every refused request gets one, with the request's xid and its first bytes:
//! a silent drop leaves a controller waiting.

const OFPET_HELLO_FAILED: u16 = 0;
const OFPET_BAD_REQUEST: u16 = 1;
const OFPET_SWITCH_CONFIG_FAILED: u16 = 10;
const OFPET_ROLE_REQUEST_FAILED: u16 = 11;
const OFPET_BAD_PROPERTY: u16 = 14;
const OFPET_FLOW_MONITOR_FAILED: u16 = 16;
/// Experimenter errors (OpenFlow 1.2 on): the code is the experimenter's, and the
/// experimenter ID leads the data.
pub const OFPET_EXPERIMENTER: u16 = 0xffff;

/// The most of a refused request an error carries (the spec asks for at least 64
/// bytes, or the whole request when shorter).
pub const ERROR_DATA_LEN: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no common OpenFlow version (HELLO_FAILED/INCOMPATIBLE)")]
    HelloIncompatible,
    #[error("a message in another version than the connection's (BAD_REQUEST/BAD_VERSION)")]
    BadVersion,
    #[error("a message type vsw does not take (BAD_REQUEST/BAD_TYPE)")]
    BadType,
    #[error("an experimenter (vendor) message vsw does not take (BAD_REQUEST/BAD_EXPERIMENTER)")]
    BadExperimenter,
    #[error("an experimenter message of a type vsw does not take (BAD_REQUEST/BAD_EXP_TYPE)")]
    BadExperimenterType,
    #[error(transparent)]
    Tlv(#[from] crate::tlv::BadTlv),
    #[error("a message whose length does not fit its type (BAD_REQUEST/BAD_LEN)")]
    BadLen,
    #[error("a multipart request of a type vsw does not answer (BAD_REQUEST/BAD_MULTIPART)")]
    BadMultipart,
    #[error(
        "a switch configuration with flags vsw does not have (SWITCH_CONFIG_FAILED/BAD_FLAGS)"
    )]
    BadConfigFlags,
    #[error("a packet-out naming a buffer; vsw keeps none (BAD_REQUEST/BUFFER_UNKNOWN)")]
    BufferUnknown,
    #[error("a packet-out from a port that is none (BAD_REQUEST/BAD_PORT)")]
    BadPort,
    #[error("a packet-out whose packet's headers are broken (BAD_REQUEST/BAD_PACKET)")]
    BadPacket,
    #[error("a packet-out whose actions the switch cannot take for this packet (BAD_ACTION/BAD_ARGUMENT)")]
    BadArgument,
    #[error("a request that changes the switch from a slave controller (BAD_REQUEST/IS_SLAVE)")]
    IsSlave,
    #[error("a role request with a role that is none (ROLE_REQUEST_FAILED/BAD_ROLE)")]
    BadRole,
    #[error("a role request with a generation id older than one seen (ROLE_REQUEST_FAILED/STALE)")]
    StaleRole,
    #[error("a flow monitor with an id already in use (FLOW_MONITOR_FAILED/MONITOR_EXISTS)")]
    MonitorExists,
    #[error("a flow monitor cancelled that is none (FLOW_MONITOR_FAILED/UNKNOWN_MONITOR)")]
    MonitorUnknown,
    #[error("a flow monitor with flags that ask for no change or that vsw does not know (FLOW_MONITOR_FAILED/BAD_FLAGS)")]
    MonitorBadFlags,
    #[error(
        "a flow monitor request with a command that is none (FLOW_MONITOR_FAILED/BAD_COMMAND)"
    )]
    MonitorBadCommand,
    #[error("an NXT_SET_FLOW_FORMAT naming no format vsw has (BAD_REQUEST/EPERM)")]
    BadFlowFormat,
    #[error("a property of a bad type, length or value (BAD_PROPERTY/{0})")]
    BadProperty(u16),
    #[error(transparent)]
    FlowMod(#[from] crate::flow_mod::BadFlowMod),
    #[error(transparent)]
    GroupMod(#[from] crate::group_mod::BadGroupMod),
    #[error(transparent)]
    PortMod(#[from] crate::port_mod::BadPortMod),
    #[error(transparent)]
    MeterMod(#[from] crate::meter_mod::BadMeterMod),
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BadBundle),
}

impl Refusal {
    /// The error type and code in OpenFlow 1.2 and 1.3: as [`Refusal::type_code`],
    /// but they have no flow monitor errors of their own, and say them as Nicira's
    /// experimenter codes (as Open vSwitch does).
    pub fn type_code_before_1_4(self) -> (u16, u16) {
        match self {
            Refusal::MonitorExists => (OFPET_EXPERIMENTER, 6),
            Refusal::MonitorBadFlags => (OFPET_EXPERIMENTER, 7),
            Refusal::MonitorUnknown => (OFPET_EXPERIMENTER, 8),
            other => other.type_code(),
        }
    }

    /// The error type and code on the wire.
    pub fn type_code(self) -> (u16, u16) {
        match self {
            Refusal::HelloIncompatible => (OFPET_HELLO_FAILED, 0),
            Refusal::BadVersion => (OFPET_BAD_REQUEST, 0),
            Refusal::BadType => (OFPET_BAD_REQUEST, 1),
            Refusal::BadLen => (OFPET_BAD_REQUEST, 6),
            Refusal::BadExperimenter => (OFPET_BAD_REQUEST, 3),
            Refusal::BadExperimenterType => (OFPET_BAD_REQUEST, 4),
            Refusal::Tlv(e) => (OFPET_EXPERIMENTER, e.code()),
            Refusal::BadMultipart => (OFPET_BAD_REQUEST, 2),
            Refusal::BadConfigFlags => (OFPET_SWITCH_CONFIG_FAILED, 0),
            Refusal::BufferUnknown => (OFPET_BAD_REQUEST, 8),
            Refusal::BadPort => (OFPET_BAD_REQUEST, 11),
            Refusal::BadPacket => (OFPET_BAD_REQUEST, 12),
            Refusal::BadArgument => (2, 5),
            Refusal::IsSlave => (OFPET_BAD_REQUEST, 10),
            Refusal::BadFlowFormat => (OFPET_BAD_REQUEST, 5),
            // As 1.4 says them (OFPET_FLOW_MONITOR_FAILED); 1.0 has Nicira's.
            Refusal::MonitorExists => (OFPET_FLOW_MONITOR_FAILED, 1),
            Refusal::MonitorUnknown => (OFPET_FLOW_MONITOR_FAILED, 3),
            Refusal::MonitorBadCommand => (OFPET_FLOW_MONITOR_FAILED, 4),
            Refusal::MonitorBadFlags => (OFPET_FLOW_MONITOR_FAILED, 5),
            Refusal::BadRole => (OFPET_ROLE_REQUEST_FAILED, 2),
            Refusal::StaleRole => (OFPET_ROLE_REQUEST_FAILED, 0),
            Refusal::BadProperty(code) => (OFPET_BAD_PROPERTY, code),
            Refusal::FlowMod(e) => e.type_code(),
            Refusal::GroupMod(e) => e.type_code(),
            Refusal::PortMod(e) => e.type_code(),
            Refusal::MeterMod(e) => e.type_code(),
            // As 1.4 on says it (`answer_in` says it in 1.3's words too).
            Refusal::Bundle(e) => (crate::bundle::OFPET_BUNDLE_FAILED, e as u16),
        }
    }
}
