/// A failure of the keychain database: a code to match on and a message that never contains item contents.
package struct StoreError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, matchable with `~=`.
    package struct Code: RawRepresentable, Hashable, Sendable {
        package var rawValue: Int
        package init(rawValue: Int) { self.rawValue = rawValue }

        /// A row with the same blind index (class, primary key, access group, synchronizable) exists.
        package static let duplicate = Code(rawValue: 1)
        /// The file or a record in it does not decode or fails authentication.
        package static let corrupt = Code(rawValue: 2)
        /// The file system or SQLite refused an operation.
        package static let io = Code(rawValue: 3)
        /// The disk is full.
        package static let diskFull = Code(rawValue: 4)
        /// The file is on a read-only filesystem, or this process may not write it.
        package static let readOnly = Code(rawValue: 5)

        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? StoreError)?.code == code
        }
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "StoreError(\(code.rawValue)): \(message)" }
}
