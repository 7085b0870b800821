import Foundation
import SecureCrypto

/// A finger, numbered as libfprint's `FpFinger`.
package enum Finger: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// Not recorded (`FP_FINGER_UNKNOWN`); never used for a new enrollment.
    case unknown = 0
    /// The fingers of the left hand, thumb to little finger (`FP_FINGER_LEFT_*`, 1 to 5).
    case leftThumb = 1, leftIndex, leftMiddle, leftRing, leftLittle
    /// The fingers of the right hand, thumb to little finger (`FP_FINGER_RIGHT_*`, 6 to 10).
    case rightThumb = 6, rightIndex, rightMiddle, rightRing, rightLittle

    /// The command-line name, e.g. `right-index`.
    package var name: String {
        switch self {
        case .unknown: "unknown"
        case .leftThumb: "left-thumb"
        case .leftIndex: "left-index"
        case .leftMiddle: "left-middle"
        case .leftRing: "left-ring"
        case .leftLittle: "left-little"
        case .rightThumb: "right-thumb"
        case .rightIndex: "right-index"
        case .rightMiddle: "right-middle"
        case .rightRing: "right-ring"
        case .rightLittle: "right-little"
        }
    }

    /// The finger called `name` (as in ``name``), or nil.
    package init?(name: String) {
        guard let finger = Finger.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = finger
    }

    /// The command-line name.
    package var description: String { name }
}

/// A 16-byte random identifier given to each enrolled print; it is what the enrolled-set state hash covers.
package struct PrintIdentifier: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The identifier's bytes (always 16).
    package let bytes: Data

    /// Wraps 16 bytes. - Throws: `AuthenticationError` otherwise.
    package init(bytes: Data) throws {
        guard bytes.count == 16 else {
            throw AuthenticationError(.invalidContext, "a print identifier is 16 bytes, not \(bytes.count)")
        }
        self.bytes = Data(bytes)
    }

    /// Parses the 32-digit lowercase hexadecimal form. - Throws: `AuthenticationError` on anything else.
    package init(hex: String) throws {
        var bytes = Data()
        var digits = hex.lowercased().makeIterator()
        while let high = digits.next() {
            guard let low = digits.next(), let h = high.hexDigitValue, let l = low.hexDigitValue else {
                throw AuthenticationError(.invalidContext, "'\(hex)' is not a print identifier (32 hex digits)")
            }
            bytes.append(UInt8(h << 4 | l))
        }
        try self.init(bytes: bytes)
    }

    /// A fresh identifier from the system's cryptographically secure generator.
    package static func random() throws -> PrintIdentifier {
        try PrintIdentifier(bytes: SecureRandom.bytes(16))
    }

    /// The 32-digit lowercase hexadecimal form.
    package var hex: String { bytes.map { String(format: "%02x", $0) }.joined() }
    /// The hexadecimal form.
    package var description: String { hex }

    /// Byte-wise lexicographic order, the order the state hash uses.
    package static func < (lhs: PrintIdentifier, rhs: PrintIdentifier) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

/// What is known about an enrolled print without its template.
package struct EnrolledPrintInfo: Sendable, Equatable {
    /// The print's random identifier (covered by the state hash).
    package var identifier: PrintIdentifier
    /// Which finger was scanned.
    package var finger: Finger
    /// The user the print belongs to.
    package var username: String
    /// The libfprint driver that made it (`fp_print_get_driver`); a print only matches on that driver's readers.
    package var driver: String
    /// The reader's device id within its driver (`fp_print_get_device_id`).
    package var deviceID: String
    /// When it was enrolled (whole seconds).
    package var enrolledAt: Date

    /// Describes an enrolled print.
    package init(
        identifier: PrintIdentifier, finger: Finger, username: String, driver: String, deviceID: String,
        enrolledAt: Date
    ) {
        self.identifier = identifier
        self.finger = finger
        self.username = username
        self.driver = driver
        self.deviceID = deviceID
        self.enrolledAt = enrolledAt
    }
}

/// An enrolled print: its description and its template (`fp_print_serialize` output), which is biometric data
/// and therefore kept in zeroizing memory.
package struct EnrolledPrint: Sendable {
    /// What the print is.
    package var info: EnrolledPrintInfo
    /// The libfprint template, `fp_print_serialize` output.
    package var template: SecureBytes

    /// Pairs a description with its template.
    package init(info: EnrolledPrintInfo, template: SecureBytes) {
        self.info = info
        self.template = template
    }
}
