import Foundation
import PropertyBased
import SecureCrypto
import SecurityProtocol
import Testing

/// What the property tests need of a message type.
typealias CodableMessage = ProtocolCodable & Equatable & Arbitrary

/// One message type, for parameterized tests: its name, and a property check over its generated values.
struct MessageType: Sendable, CustomTestStringConvertible {
    let name: String
    /// Runs a property over `count` generated values.
    let check:
        @Sendable (_ count: Int, _ property: @escaping @Sendable (any CodableMessage) throws -> Void) async -> Void

    static func of<T: CodableMessage>(_ type: T.Type) -> MessageType {
        MessageType(name: "\(type)") { count, property in
            await propertyCheck(count: count, input: T.generator) { try property($0) }
        }
    }

    var testDescription: String { name }

    /// Every type that crosses the seam.
    static let all: [MessageType] = [
        .of(KeychainRequest.self), .of(KeychainResponse.self), .of(KeyRequest.self), .of(KeyResponse.self),
        .of(X963KDFParameters.self), .of(ItemResults.self), .of(ItemResult.self), .of(ItemMaterial.self),
        .of(ItemReference.self), .of(ItemClass.self), .of(ReturnOptions.self), .of(EngineEvent.self),
        .of(KeychainValue.self), .of(AccessControlPolicy.self), .of(KeychainStatus.self),
        .of(AuthenticationError.self), .of(AuthenticationContextID.self), .of(AccessControlOperation.self),
        .of(EvaluationPolicy.self), .of(Credential.self), .of(AuthenticationMethod.self),
        .of(PolicyAvailability.self), .of(EnvironmentSnapshot.self), .of(EvaluationPrompt.self),
        .of(PromptAction.self), .of(FingerprintPromptEvent.self), .of(ScanRetryReason.self),
        .of(PasscodePrompt.self), .of(PasscodeMessage.self), .of(Finger.self), .of(PrintIdentifier.self),
        .of(EnrolledPrintInfo.self), .of(EnrollmentEvent.self), .of(ECIES.Variant.self),
        .of(EvaluationOptions.self), .of(AuthenticationRequest.self), .of(AuthenticationResponse.self),
        .of(PromptEvent.self), .of(PromptAnswer.self), .of(ReaderInfo.self), .of(CallerInfo.self),
        .of(VerificationEvent.self),
        .of(AdministrationRequest.self), .of(AdministrationEvent.self), .of(ClientMessage.self),
        .of(ServerMessage.self),
    ]
}

/// `value` decodes from its frame to an equal value that encodes to the same bytes.
func expectRoundTrip<T: ProtocolCodable & Equatable>(_ value: T) throws {
    let frame = value.encoded()
    let decoded = try T(decoding: frame)
    #expect(decoded == value)
    #expect(decoded.encoded() == frame)
}

@Suite("Protocol codec: round trips")
struct RoundTripTests {
    @Test(arguments: MessageType.all)
    func everyMessageTypeRoundTrips(_ type: MessageType) async {
        await type.check(300) { try expectRoundTrip($0) }
    }

    @Test func equalDictionariesEncodeToEqualBytesWhateverTheirInsertionOrder() throws {
        var forwards: [String: KeychainValue] = [:]
        var backwards: [String: KeychainValue] = [:]
        let keys = (0..<40).map { "k\($0)" } + ["é", "e\u{301}x", "Z", "a", "🔑", ""]
        for (index, key) in keys.enumerated() { forwards[key] = .integer(Int64(index)) }
        for (index, key) in keys.enumerated().reversed() { backwards[key] = .integer(Int64(index)) }
        #expect(KeychainRequest.add(forwards).encoded() == KeychainRequest.add(backwards).encoded())
        try expectRoundTrip(KeychainRequest.add(forwards))
    }

    @Test func everyDoubleBitPatternSurvivesIncludingNaNPayloadsAndNegativeZero() throws {
        for bits: UInt64 in [0x7FF8_0000_0000_0001, 0xFFF0_0000_0000_0001, 0x8000_0000_0000_0000, 1] {
            let value = KeychainValue.date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits)))
            guard case .date(let date) = try KeychainValue(decoding: value.encoded()) else {
                Issue.record("not a date")
                continue
            }
            #expect(date.timeIntervalSinceReferenceDate.bitPattern == bits)
        }
    }
}
