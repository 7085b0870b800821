/// The engine-side handle of an `LAContext` (`kSecUseAuthenticationContext`): 32 random bytes the client holds,
/// unguessable, so a context can only be used by whoever was given it.
package struct AuthenticationContextID: Hashable, Sendable, CustomStringConvertible {
    package let bytes: [UInt8]

    package init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Never shows the handle itself, which is a bearer credential.
    package var description: String { "AuthenticationContextID(…)" }
}

extension AuthenticationContextID: ProtocolCodable {
    /// The handle's bytes.
    package func encode(into writer: inout MessageWriter) {
        bytes.withUnsafeBytes { writer.rawBytes($0) }
    }

    /// The bytes, whatever their number (the engine finds no context for a handle of another size).
    package init(from reader: inout MessageReader) throws {
        self.init(bytes: reader.remainingBytes().withUnsafeBytes { Array($0) })
    }
}
