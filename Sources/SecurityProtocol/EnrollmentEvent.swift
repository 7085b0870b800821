/// A progress report during an enrollment.
package enum EnrollmentEvent: Sendable, Equatable {
    /// `completed` of `total` stages are done.
    case stageCompleted(completed: Int, total: Int)
    /// The last scan was not usable; the user scans again (stage unchanged). `detail` is the reader's message.
    case retry(reason: ScanRetryReason, completed: Int, total: Int, detail: String)
}

extension EnrollmentEvent: ProtocolCodable {
    /// A variant: 1 stageCompleted (fields 1 completed, 2 total), 2 retry (fields 1 reason, 2 completed, 3 total,
    /// 4 detail).
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .stageCompleted(let completed, let total):
            writer.variant(1) {
                $0.field(1, completed)
                $0.field(2, total)
            }
        case .retry(let reason, let completed, let total, let detail):
            writer.variant(2) {
                $0.field(1, reason)
                $0.field(2, completed)
                $0.field(3, total)
                $0.field(4, detail)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .stageCompleted(completed: try payload.field(1), total: try payload.field(2))
            case 2:
                .retry(
                    reason: try payload.field(1), completed: try payload.field(2), total: try payload.field(3),
                    detail: try payload.field(4))
            default: nil
            }
        }
    }
}
