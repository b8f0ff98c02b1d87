//! Table numbers of the pipeline.

/// The highest table number (OpenFlow's 255 means "all tables" in requests).
pub const MAX_TABLE: u8 = 254;
