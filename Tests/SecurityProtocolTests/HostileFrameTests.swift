import Foundation
import PropertyBased
import SecureCrypto
import SecurityProtocol
import TestSupport
import Testing

/// The frame of `value` as ordinary bytes, to cut and corrupt.
func frameBytes(_ value: some ProtocolCodable) -> [UInt8] {
    value.encoded().withUnsafeBytes { Array($0) }
}

/// The codec's error for decoding `bytes` as `type`, or nil when they decode; any other error fails the test.
func decodingError<T: ProtocolCodable>(
    _ bytes: [UInt8], as type: T.Type, limits: MessageLimits = .default,
    sourceLocation: SourceLocation = #_sourceLocation
) -> MessageDecodingError? {
    do {
        _ = try T(decoding: bytes, limits: limits)
        return nil
    } catch let error as MessageDecodingError {
        return error
    } catch {
        Issue.record("not the codec's error: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// A frame whose value `body` writes by hand (so it may break the rules `MessageWriter.field` enforces).
func handMadeFrame(_ body: (inout MessageWriter) -> Void) -> [UInt8] {
    var writer = MessageWriter()
    writer.byte(MessageWriter.formatVersion)
    writer.lengthPrefixed(body)
    return Array(writer.data)
}

extension MessageWriter {
    /// A field written without the ascending-tag check.
    mutating func rawField(_ tag: UInt8, _ body: (inout MessageWriter) -> Void) {
        byte(tag)
        lengthPrefixed(body)
    }
}

/// A deterministic stream of positions and bytes derived from a frame, for corrupting it reproducibly.
struct FrameMutations: RandomNumberGenerator {
    private var generator: SplitMix64

    init(_ frame: [UInt8]) {
        generator = SplitMix64(seed: frame.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 })
    }

    mutating func next() -> UInt64 { generator.next() }
}

/// Decoding corrupted `bytes` as `T` either fails with the codec's error or gives a value whose frame is exactly
/// `bytes`: the decoder accepts canonical frames only, whatever it is fed.
func expectCanonicalOrRejected<T: ProtocolCodable>(_ bytes: [UInt8], as type: T.Type) {
    do {
        let decoded = try T(decoding: bytes)
        #expect(frameBytes(decoded) == bytes, "a non-canonical frame decoded")
    } catch is MessageDecodingError {
    } catch {
        Issue.record("not the codec's error: \(error)")
    }
}

/// Every cut of `value`'s frame is `truncated`: every cut of a short frame; of a longer one, the first and last 64
/// and 64 spread between.
func expectEveryCutTruncated<T: ProtocolCodable>(_ value: T) {
    let bytes = frameBytes(value)
    var cuts = Array(0..<bytes.count)
    if bytes.count > 192 {
        cuts = Array(0..<64) + Array(bytes.count - 64..<bytes.count)
        cuts += stride(from: 64, to: bytes.count - 64, by: (bytes.count - 128) / 64)
    }
    for cut in cuts {
        #expect(decodingError(Array(bytes[..<cut]), as: T.self)?.code == .truncated)
    }
}

/// Corrupting `value`'s frame (random bytes, and a 4 GiB length wherever a length could be) never yields anything
/// but the codec's error or a canonical frame.
func expectCorruptionsRejectedOrCanonical<T: ProtocolCodable>(_ value: T) {
    let bytes = frameBytes(value)
    var mutations = FrameMutations(bytes)
    for _ in 0..<40 {
        var corrupted = bytes
        for _ in 0..<Int.random(in: 1...3, using: &mutations) {
            let position = Int.random(in: 0..<corrupted.count, using: &mutations)
            corrupted[position] = UInt8.random(in: 0...255, using: &mutations)
        }
        expectCanonicalOrRejected(corrupted, as: T.self)
    }
    for position in stride(from: 1, to: bytes.count - 3, by: max(1, bytes.count / 48)) {
        var corrupted = bytes
        corrupted.replaceSubrange(position..<position + 4, with: [0xFF, 0xFF, 0xFF, 0xFF])
        expectCanonicalOrRejected(corrupted, as: T.self)
    }
}

@Suite("Protocol codec: hostile frames")
struct HostileFrameTests {
    @Test(arguments: MessageType.all)
    func everyCutOfEveryFrameIsTruncated(_ type: MessageType) async {
        await type.check(60) { expectEveryCutTruncated($0) }
    }

    @Test(arguments: MessageType.all)
    func trailingBytesAreRejected(_ type: MessageType) async {
        await type.check(60) { value in
            func check<T: ProtocolCodable>(_ value: T) {
                #expect(decodingError(frameBytes(value) + [0], as: T.self)?.code == .trailingBytes)
            }
            check(value)
        }
    }

    @Test(arguments: MessageType.all)
    func corruptedFramesAreRejectedOrCanonical(_ type: MessageType) async {
        await type.check(100) { expectCorruptionsRejectedOrCanonical($0) }
    }

    @Test func arbitraryBytesBehindAValidHeaderAreRejectedOrCanonical() async {
        await propertyCheck(count: 2000, input: Gen.uint8(in: 0...255).array(of: 0...48)) { body in
            let bytes =
                [MessageWriter.formatVersion] + withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + body
            expectCanonicalOrRejected(bytes, as: KeychainRequest.self)
            expectCanonicalOrRejected(bytes, as: KeychainResponse.self)
            expectCanonicalOrRejected(bytes, as: KeyRequest.self)
            expectCanonicalOrRejected(bytes, as: ItemResult.self)
            expectCanonicalOrRejected(bytes, as: AuthenticationError.self)
        }
    }

    @Test func aDeclaredLengthBeyondTheFrameIsTruncatedBeforeAnythingIsAllocated() {
        // add(…) whose field 1 (the attributes) declares 4 GiB in a 10-byte frame.
        let hostile = handMadeFrame { writer in
            writer.rawField(1) { payload in
                payload.byte(1)
                payload.uint32(0xFFFF_FFFF)
            }
        }
        #expect(decodingError(hostile, as: KeychainRequest.self)?.code == .truncated)
        var oversized = frameBytes(KeychainRequest.lock)
        oversized.replaceSubrange(1..<5, with: [0xFF, 0xFF, 0xFF, 0xF0])
        #expect(decodingError(oversized, as: KeychainRequest.self)?.code == .truncated)
    }

    @Test func aCountTheBytesCannotHoldIsRejectedBeforeReservingForIt() {
        // add(dictionary) whose count claims a million entries in 4 bytes of frame.
        let frame = handMadeFrame { writer in
            writer.rawField(1) { payload in payload.rawField(1) { $0.uint32(1 << 20) } }
        }
        #expect(decodingError(frame, as: KeychainRequest.self)?.code == .truncated)
    }

    @Test func collectionsAndFramesBeyondTheLimitsAreRejected() {
        let items = (0..<4).map { _ in ItemResult(itemClass: .genericPassword) }
        let response = KeychainResponse.items(ItemResults(returns: .data, isSingle: false, items: items))
        let fewElements = MessageLimits(maximumFrameByteCount: 1 << 20, maximumDepth: 32, maximumElementCount: 3)
        #expect(
            decodingError(frameBytes(response), as: KeychainResponse.self, limits: fewElements)?.code
                == .tooManyElements)
        let smallFrames = MessageLimits(maximumFrameByteCount: 16, maximumDepth: 32, maximumElementCount: 3)
        #expect(
            decodingError(frameBytes(response), as: KeychainResponse.self, limits: smallFrames)?.code == .frameTooLarge)
    }

    @Test func unknownCasesAndFieldsAreRejected() {
        // Case 99 of KeychainRequest.
        #expect(
            decodingError(handMadeFrame { $0.rawField(99, { _ in }) }, as: KeychainRequest.self)?.code == .unknownTag)
        // EvaluationPrompt has fields 1 to 3: a field 9 after them.
        let afterLast = handMadeFrame { writer in
            writer.rawField(1) { $0.rawString("why") }
            writer.rawField(9) { $0.rawString("?") }
        }
        #expect(decodingError(afterLast, as: EvaluationPrompt.self)?.code == .unknownTag)
        // Credential has fields 1 to 5; a field 6.
        var credential = frameBytes(
            Credential(
                method: .passcode, time: Date(timeIntervalSinceReferenceDate: 0), enrolledSetHash: nil, user: "u"))
        credential += [6, 0, 0, 0, 0]
        credential.replaceSubrange(1..<5, with: withUnsafeBytes(of: UInt32(credential.count - 5).bigEndian, Array.init))
        #expect(decodingError(credential, as: Credential.self)?.code == .unknownTag)
    }

    @Test func fieldsOutOfOrderOrRepeatedAreNotCanonical() {
        // EvaluationPrompt's fields 1, 3, 2.
        let swapped = handMadeFrame { writer in
            writer.rawField(1) { $0.rawString("why") }
            writer.rawField(3) { $0.rawString("Cancel") }
            writer.rawField(2) { $0.rawString("Enter Password") }
        }
        #expect(decodingError(swapped, as: EvaluationPrompt.self)?.code == .nonCanonical)
        // A required field that comes after its successor is missing where it belongs.
        let late = handMadeFrame { writer in
            writer.rawField(2) { $0.byte(1) }
            writer.rawField(1) { $0.rawString("Password: ") }
        }
        #expect(decodingError(late, as: PasscodePrompt.self)?.code == .missingField)
        let repeated = handMadeFrame { writer in
            writer.rawField(1) { $0.rawString("Password: ") }
            writer.rawField(1) { $0.rawString("Password: ") }
            writer.rawField(2) { $0.byte(1) }
        }
        #expect(decodingError(repeated, as: PasscodePrompt.self)?.code == .nonCanonical)
        let twoCases = handMadeFrame { writer in
            writer.rawField(5, { _ in })
            writer.rawField(6, { _ in })
        }
        #expect(decodingError(twoCases, as: KeychainRequest.self)?.code == .nonCanonical)
    }

    @Test func dictionaryKeysOutOfOrderOrRepeatedAreNotCanonical() {
        func attributes(_ keys: [String]) -> [UInt8] {
            handMadeFrame { writer in
                writer.rawField(2) { payload in
                    payload.rawField(1) { dictionary in
                        dictionary.uint32(UInt32(keys.count))
                        for key in keys {
                            dictionary.string(key)
                            dictionary.lengthPrefixed { KeychainValue.bool(true).encode(into: &$0) }
                        }
                    }
                }
            }
        }
        #expect(decodingError(attributes(["acct", "svce"]), as: KeychainRequest.self) == nil)
        #expect(decodingError(attributes(["svce", "acct"]), as: KeychainRequest.self)?.code == .nonCanonical)
        #expect(decodingError(attributes(["acct", "acct"]), as: KeychainRequest.self)?.code == .nonCanonical)
        // One key to Swift, two byte strings: é precomposed and decomposed.
        #expect(decodingError(attributes(["e\u{301}", "\u{E9}"]), as: KeychainRequest.self)?.code == .nonCanonical)
    }

    @Test func valuesNoTypeEncodesToAreInvalid() {
        let prompt = { (echo: UInt8) in
            handMadeFrame { writer in
                writer.rawField(1) { $0.rawString("Password: ") }
                writer.rawField(2) { $0.byte(echo) }
            }
        }
        #expect(decodingError(prompt(1), as: PasscodePrompt.self) == nil)
        #expect(decodingError(prompt(2), as: PasscodePrompt.self)?.code == .invalidValue)
        #expect(decodingError(handMadeFrame { $0.rawString("zzzz") }, as: ItemClass.self)?.code == .invalidValue)
        #expect(decodingError(handMadeFrame { $0.rawBytes([0xC3, 0x28]) }, as: String.self)?.code == .invalidValue)
        #expect(decodingError(handMadeFrame { $0.uint32(7) }, as: Int64.self)?.code == .invalidValue)
        #expect(decodingError(handMadeFrame { $0.byte(0x10) }, as: ReturnOptions.self)?.code == .invalidValue)
        #expect(decodingError(handMadeFrame { $0.byte(9) }, as: AccessControlOperation.self)?.code == .invalidValue)
        #expect(
            decodingError(handMadeFrame { $0.rawBytes([1, 2, 3]) }, as: PrintIdentifier.self)?.code == .invalidValue)
    }

    /// Strings are read ASCII-first, eight bytes at a time: a byte that is not UTF-8 is found wherever it sits (in
    /// the first word, after whole words, in the tail), in strings and in dictionary keys, and valid multi-byte text
    /// at those places still reads back.
    @Test func aStringIsUTF8WhereverItsFirstNonASCIIByteSits() throws {
        for prefix in [0, 1, 7, 8, 9, 16, 23] {
            let ascii = Array(repeating: UInt8(ascii: "k"), count: prefix)
            #expect(
                decodingError(handMadeFrame { $0.rawBytes(ascii + [0xC3, 0x28]) }, as: String.self)?.code
                    == .invalidValue,
                "an invalid byte after \(prefix) ASCII bytes")
            #expect(
                decodingError(handMadeFrame { $0.rawBytes(ascii + [0xFF]) }, as: String.self)?.code == .invalidValue)
            let text = String(decoding: ascii, as: UTF8.self) + "é🔑"
            let frame = handMadeFrame { $0.rawString(text) }
            #expect(try String(decoding: frame, limits: .default) == text)
            let key = handMadeFrame { writer in
                writer.uint32(1)
                writer.bytes(ascii + [0xED, 0xA0, 0x80])
                writer.lengthPrefixed { KeychainValue.bool(true).encode(into: &$0) }
            }
            #expect(decodingError(key, as: [String: KeychainValue].self)?.code == .invalidValue, "a surrogate in a key")
        }
    }

    @Test func aMissingRequiredFieldIsNamed() {
        let frame = handMadeFrame { $0.rawField(1) { $0.rawString("Password: ") } }
        #expect(decodingError(frame, as: PasscodePrompt.self)?.code == .missingField)
    }

    @Test func anotherFormatVersionIsRefused() {
        var frame = frameBytes(KeychainRequest.lockState)
        frame[0] = 2
        #expect(decodingError(frame, as: KeychainRequest.self)?.code == .unsupportedVersion)
    }

    @Test func nestingBeyondTheLimitStopsWithoutExhaustingTheStack() {
        // A hundred thousand nested cases: each level is `case 2 | length | field 1 | length`, the innermost
        // `case 1` with an empty payload.
        let levels = 100_000
        var writer = MessageWriter(capacity: 10 * levels + 16)
        writer.byte(MessageWriter.formatVersion)
        writer.uint32(UInt32(10 * levels + 5))
        for level in stride(from: levels, to: 0, by: -1) {
            writer.byte(2)
            writer.uint32(UInt32(10 * level))
            writer.byte(1)
            writer.uint32(UInt32(10 * level - 5))
        }
        writer.byte(1)
        writer.uint32(0)
        let error = decodingError(Array(writer.data), as: Nesting.self)
        #expect(error?.code == .tooDeep)
        #expect(decodingError(frameBytes(Nesting(depth: 10)), as: Nesting.self) == nil)
    }

    @Test func theDeepestMessageFitsTheDefaultDepthAndNoLess() {
        let material = ItemMaterial(
            attributes: ["accc": .accessControl(AccessControlPolicy(protection: "ak", flags: 1))],
            data: SecureBytes([1]))
        let response = KeychainResponse.items(
            ItemResults(
                returns: .reference, isSingle: true,
                items: [
                    ItemResult(itemClass: .identity, reference: .identity(certificate: material, privateKey: material))
                ]))
        let frame = frameBytes(response)
        let depth = { (maximum: Int) in
            MessageLimits(maximumFrameByteCount: 1 << 20, maximumDepth: maximum, maximumElementCount: 16)
        }
        // Thirteen scopes: the frame, the response's case, ItemResults, the items array, an ItemResult, the
        // reference and its case, an ItemMaterial, the attributes, a KeychainValue and its case, an
        // AccessControlPolicy, its protection string.
        #expect(decodingError(frame, as: KeychainResponse.self, limits: depth(13)) == nil)
        #expect(decodingError(frame, as: KeychainResponse.self, limits: depth(12))?.code == .tooDeep)
        #expect(MessageLimits.default.maximumDepth >= 2 * 13)
    }
}

/// A recursive message no real type is, to nest frames as deeply as a hostile peer could.
indirect enum Nesting: ProtocolCodable, Equatable {
    case leaf
    case node(Nesting)

    init(depth: Int) {
        self = (0..<depth).reduce(Nesting.leaf) { inner, _ in .node(inner) }
    }

    func encode(into writer: inout MessageWriter) {
        switch self {
        case .leaf: writer.variant(1)
        case .node(let inner): writer.variant(2) { $0.field(1, inner) }
        }
    }

    init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .leaf
            case 2: .node(try payload.field(1))
            default: nil
            }
        }
    }
}
