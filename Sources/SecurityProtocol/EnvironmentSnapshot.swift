import Foundation

/// What the engine knows of the user's authentication mechanisms at one moment (`LAEnvironment.State`).
package struct EnvironmentSnapshot: Sendable, Equatable {
    /// Whether an acceptable fingerprint reader answered the last time it was asked.
    package var readerPresent: Bool
    /// Whether the user has an enrolled print.
    package var enrolled: Bool
    /// Whether biometry is locked until a passcode success.
    package var lockedOut: Bool
    /// The enrolled-set state hash: the global one inside the engine, derived per application in every snapshot a
    /// client receives (the engine's `forApplication(_:)`).
    package var stateHash: Data?
    /// Whether the user has a passcode PAM can check.
    package var passcodeSet: Bool

    /// A snapshot with these facts.
    package init(readerPresent: Bool, enrolled: Bool, lockedOut: Bool, stateHash: Data?, passcodeSet: Bool) {
        self.readerPresent = readerPresent
        self.enrolled = enrolled
        self.lockedOut = lockedOut
        self.stateHash = stateHash
        self.passcodeSet = passcodeSet
    }
}

extension EnvironmentSnapshot: ProtocolCodable {
    /// A record: 1 readerPresent, 2 enrolled, 3 lockedOut, 4 stateHash (absent when nil), 5 passcodeSet.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, readerPresent)
        writer.field(2, enrolled)
        writer.field(3, lockedOut)
        writer.optionalField(4, stateHash)
        writer.field(5, passcodeSet)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(
            readerPresent: try reader.field(1), enrolled: try reader.field(2), lockedOut: try reader.field(3),
            stateHash: try reader.optionalField(4), passcodeSet: try reader.field(5))
    }
}
