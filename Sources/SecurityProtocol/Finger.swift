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

/// The `FpFinger` number, eight bytes.
extension Finger: ProtocolCodable {}
