/// Bounds a decoder holds a frame to, so that a hostile frame cannot make it recurse or allocate without limit.
///
/// Lengths and counts are also checked against the bytes actually present, so what a decoder allocates stays
/// within a small multiple of the frame's size whatever the limits.
package struct MessageLimits: Sendable, Hashable {
    /// The largest frame accepted, in bytes.
    package var maximumFrameByteCount: Int
    /// How deeply values may nest (every field, element and case payload is one level).
    package var maximumDepth: Int
    /// The most elements one array or dictionary may hold.
    package var maximumElementCount: Int

    /// Limits with these values.
    package init(maximumFrameByteCount: Int, maximumDepth: Int, maximumElementCount: Int) {
        self.maximumFrameByteCount = maximumFrameByteCount
        self.maximumDepth = maximumDepth
        self.maximumElementCount = maximumElementCount
    }

    /// 64 MiB frames, 32 levels (the deepest message, an access-control list inside an identity reference in a
    /// response, uses 13), a million elements per collection.
    package static let `default` = MessageLimits(
        maximumFrameByteCount: 64 << 20, maximumDepth: 32, maximumElementCount: 1 << 20)
}
