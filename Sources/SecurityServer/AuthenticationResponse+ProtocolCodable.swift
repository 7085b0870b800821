import Foundation
import SecurityProtocol

// The response carries no presenter, so it is a message already; it moves to SecurityProtocol with
// AuthenticationRequest once prompts are messages.
extension AuthenticationResponse: ProtocolCodable {
    /// A variant: 1 success, 2 context, 3 credential, 4 availability, 5 flag, 6 biometryState (fields 1
    /// readerPresent, 2 stateHash), 7 domainState, 8 environment; associated values as fields 1, 2, nil ones left
    /// out.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .success: writer.variant(1)
        case .context(let id): writer.variant(2) { $0.field(1, id) }
        case .credential(let credential): writer.variant(3) { $0.field(1, credential) }
        case .availability(let availability): writer.variant(4) { $0.field(1, availability) }
        case .flag(let flag): writer.variant(5) { $0.field(1, flag) }
        case .biometryState(let readerPresent, let stateHash):
            writer.variant(6) {
                $0.field(1, readerPresent)
                $0.optionalField(2, stateHash)
            }
        case .domainState(let hash): writer.variant(7) { $0.optionalField(1, hash) }
        case .environment(let snapshot): writer.variant(8) { $0.field(1, snapshot) }
        }
    }

    /// - Throws: `MessageDecodingError`.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .success
            case 2: .context(try payload.field(1))
            case 3: .credential(try payload.field(1))
            case 4: .availability(try payload.field(1))
            case 5: .flag(try payload.field(1))
            case 6: .biometryState(readerPresent: try payload.field(1), stateHash: try payload.optionalField(2))
            case 7: .domainState(try payload.optionalField(1))
            case 8: .environment(try payload.field(1))
            default: nil
            }
        }
    }
}
