//! Controller roles (OFPT_ROLE_REQUEST / ROLE_REPLY): equal (the default), master
//! (at most one: a new master makes the old one a slave) and slave (reads, gets
//! port status, may not change the switch). Master and slave requests carry a
//! generation id; one older than the newest seen is STALE — so a controller that
//! lost an election cannot take the switch back with an old claim.

use crate::error::Refusal;
use crate::reader::Reader;

pub const OFPT_ROLE_REQUEST: u8 = 24;
pub const OFPT_ROLE_REPLY: u8 = 25;
/// OpenFlow 1.4's (and 1.5's) word to a controller whose role the switch changed.
pub const OFPT_ROLE_STATUS: u8 = 30;
/// Why a role changed: another controller asked to be master.
pub const OFPCRR_MASTER_REQUEST: u8 = 0;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Role {
    #[default]
    Equal,
    Master,
    Slave,
}

impl Role {
    pub fn wire(self) -> u32 {
        match self {
            Role::Equal => 1,
            Role::Master => 2,
            Role::Slave => 3,
        }
    }
}

/// A role request: `None` asks what the role is (OFPCR_ROLE_NOCHANGE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleMsg {
    pub role: Option<Role>,
    pub generation_id: u64,
}

impl RoleMsg {
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.role.map_or(0, Role::wire).to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.generation_id.to_be_bytes());
    }

    pub fn decode_body(body: &[u8]) -> Result<RoleMsg, Refusal> {
        let mut r = Reader::new(body);
        let role = r.u32().ok_or(Refusal::BadLen)?;
        r.bytes(4).ok_or(Refusal::BadLen)?;
        let generation_id = r.u64().ok_or(Refusal::BadLen)?;
        if !r.is_empty() {
            return Err(Refusal::BadLen);
        }
        let role = match role {
            0 => None,
            1 => Some(Role::Equal),
            2 => Some(Role::Master),
            3 => Some(Role::Slave),
            _ => return Err(Refusal::BadRole),
        };
        Ok(RoleMsg {
            role,
            generation_id,
        })
    }
}

/// A role status (1.4+): the connection's role is now `role`, for `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleStatus {
    pub role: Role,
    pub reason: u8,
    pub generation_id: u64,
}

impl RoleStatus {
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.role.wire().to_be_bytes());
        out.push(self.reason);
        out.extend_from_slice(&[0; 3]);
        out.extend_from_slice(&self.generation_id.to_be_bytes());
    }

    /// (Properties after the fixed part are passed over.)
    pub fn decode_body(body: &[u8]) -> Result<RoleStatus, Refusal> {
        let mut r = Reader::new(body);
        let role = match r.u32().ok_or(Refusal::BadLen)? {
            1 => Role::Equal,
            2 => Role::Master,
            3 => Role::Slave,
            _ => return Err(Refusal::BadRole),
        };
        let reason = r.u8().ok_or(Refusal::BadLen)?;
        r.bytes(3).ok_or(Refusal::BadLen)?;
        let generation_id = r.u64().ok_or(Refusal::BadLen)?;
        Ok(RoleStatus {
            role,
            reason,
            generation_id,
        })
    }
}

/// The newest generation id a switch has seen (shared by its connections).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Generation(Option<u64>);

impl Generation {
    /// Takes `id` of a master or slave request: STALE when older than the newest
    /// seen (compared as the spec asks, by the sign of the 64-bit difference).
    pub fn take(&mut self, id: u64) -> Result<(), Refusal> {
        if let Some(seen) = self.0 {
            if (id.wrapping_sub(seen) as i64) < 0 {
                return Err(Refusal::StaleRole);
            }
        }
        self.0 = Some(id);
        Ok(())
    }

    pub fn current(&self) -> u64 {
        self.0.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_messages_round_trip_and_bad_roles_are_refused() {
        for role in [
            None,
            Some(Role::Equal),
            Some(Role::Master),
            Some(Role::Slave),
        ] {
            let m = RoleMsg {
                role,
                generation_id: 0x1234,
            };
            let mut body = Vec::new();
            m.encode_body(&mut body);
            assert_eq!(RoleMsg::decode_body(&body), Ok(m));
        }
        let mut body = Vec::new();
        RoleMsg {
            role: None,
            generation_id: 0,
        }
        .encode_body(&mut body);
        body[3] = 9;
        assert_eq!(RoleMsg::decode_body(&body), Err(Refusal::BadRole));
        assert_eq!(RoleMsg::decode_body(&body[..8]), Err(Refusal::BadLen));
    }

    #[test]
    fn an_older_generation_is_stale_also_across_the_wrap() {
        let mut g = Generation::default();
        g.take(5).unwrap();
        g.take(5).unwrap();
        assert_eq!(g.take(4), Err(Refusal::StaleRole));
        g.take(u64::MAX - 1).unwrap_err();
        let mut g = Generation::default();
        g.take(u64::MAX).unwrap();
        g.take(1).unwrap();
        assert_eq!(g.current(), 1);
    }
}
