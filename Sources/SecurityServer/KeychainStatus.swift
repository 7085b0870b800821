/// An engine failure carrying the `OSStatus` Keychain Services reports for it, and a message that never contains
/// item contents or key material.
package struct KeychainStatus: Error, CustomStringConvertible, Sendable, Equatable {
    /// An `OSStatus` value, matchable with `~=`.
    package struct Code: RawRepresentable, Hashable, Sendable {
        package var rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }

        package static let param = Code(rawValue: -50)
        package static let allocate = Code(rawValue: -108)
        package static let io = Code(rawValue: -36)
        package static let diskFull = Code(rawValue: -34)
        package static let notAvailable = Code(rawValue: -25291)
        package static let authFailed = Code(rawValue: -25293)
        package static let duplicateItem = Code(rawValue: -25299)
        package static let itemNotFound = Code(rawValue: -25300)
        package static let noSuchAttribute = Code(rawValue: -25303)
        package static let noSuchClass = Code(rawValue: -25306)
        package static let interactionNotAllowed = Code(rawValue: -25308)
        package static let decode = Code(rawValue: -26275)
        package static let missingEntitlement = Code(rawValue: -34018)
        package static let internalComponent = Code(rawValue: -2070)

        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? KeychainStatus)?.code == code
        }
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "OSStatus \(code.rawValue): \(message)" }
}
