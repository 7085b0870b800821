/// Progress of a fingerprint prompt, for the presenter to show.
package enum FingerprintPromptEvent: Sendable, Equatable {
    /// The reader waits for a finger.
    case waitingForFinger
    /// The scan was not usable; `reason` says what to do differently.
    case retry(reason: ScanRetryReason)
    /// The finger matched no enrolled print.
    case notRecognized
}

extension FingerprintPromptEvent: ProtocolCodable {
    /// A variant: 1 waitingForFinger, 2 retry (field 1 reason), 3 notRecognized.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .waitingForFinger: writer.variant(1)
        case .retry(let reason): writer.variant(2) { $0.field(1, reason) }
        case .notRecognized: writer.variant(3)
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .waitingForFinger
            case 2: .retry(reason: try payload.field(1))
            case 3: .notRecognized
            default: nil
            }
        }
    }
}
