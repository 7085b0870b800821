/// A progress report during a verification.
package enum VerificationEvent: Sendable, Equatable {
    /// Waiting for a finger on the reader.
    case waitingForFinger
    /// The scan was not usable and the reader waits for another; it does not count as a failed attempt.
    case retry(reason: ScanRetryReason, detail: String)
}

extension VerificationEvent: ProtocolCodable {
    /// A variant: 1 waitingForFinger, 2 retry (fields 1 reason, 2 detail).
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .waitingForFinger: writer.variant(1)
        case .retry(let reason, let detail):
            writer.variant(2) {
                $0.field(1, reason)
                $0.field(2, detail)
            }
        }
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .waitingForFinger
            case 2: .retry(reason: try payload.field(1), detail: try payload.field(2))
            default: nil
            }
        }
    }
}
