//! The numbers of the pipeline's tables, groups and meters (kept apart from what
//! they number: actions name all three).

/// The highest table number (OpenFlow's 255 means "all tables" in requests).
pub const MAX_TABLE: u8 = 254;

/// The largest group number (OpenFlow's OFPG_MAX).
pub const MAX_GROUP_ID: u32 = 0xffff_ff00;

/// Meters are numbered 1..=MAX_METER_ID (the datapath keeps that many).
pub const MAX_METER_ID: u32 = 4096;

/// OpenFlow's default priority, used when a flow names none.
pub const DEFAULT_PRIORITY: u16 = 32768;
