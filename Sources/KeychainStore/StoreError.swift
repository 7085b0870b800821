import SecureCrypto

/// A failure of the keychain database: a code to match on and a message that never contains item contents.
package struct StoreError: CodedError, CustomStringConvertible, Sendable {
    /// What went wrong, matchable with `~=`.
    package typealias Code = ErrorCode<StoreError>

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

extension ErrorCode where Failure == StoreError {
    /// A row with the same blind index (class, primary key, access group, synchronizable) exists.
    package static var duplicate: Self { Self(rawValue: 1) }
    /// The file or a record in it does not decode or fails authentication.
    package static var corrupt: Self { Self(rawValue: 2) }
    /// The file system or SQLite refused an operation.
    package static var io: Self { Self(rawValue: 3) }
    /// The disk is full.
    package static var diskFull: Self { Self(rawValue: 4) }
    /// The file is on a read-only filesystem, or this process may not write it.
    package static var readOnly: Self { Self(rawValue: 5) }
}
