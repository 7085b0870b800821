import Foundation
import PropertyBased
import SecureCrypto
import SecurityProtocol

/// A type whose values a seeded generator can draw, so that a failing property reports a seed that replays it
/// (`@Test(.fixedSeed(…))`).
protocol Arbitrary: Sendable {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> Self
}

extension Arbitrary {
    /// The property checker's generator of this type's values (no shrinking: messages are nested enums and
    /// structs, and the seed reproduces a failure exactly).
    static var generator: Generator<Self, Shrink.None<Self>> {
        Generator(run: { rng in arbitrary(using: &rng) })
    }
}

/// Draws of the scalars messages are made of, biased towards the edges (empty, zero, extremes, multi-byte UTF-8).
enum Draw {
    static func bool(_ rng: inout any SeededRandomNumberGenerator) -> Bool {
        Bool.random(using: &rng)
    }

    static func count(_ range: ClosedRange<Int>, _ rng: inout any SeededRandomNumberGenerator) -> Int {
        Int.random(in: range, using: &rng)
    }

    /// An element of `choices`.
    static func one<T>(of choices: [T], _ rng: inout any SeededRandomNumberGenerator) -> T {
        choices[Int.random(in: 0..<choices.count, using: &rng)]
    }

    /// nil one time in three.
    static func optional<T>(
        _ rng: inout any SeededRandomNumberGenerator, _ draw: (inout any SeededRandomNumberGenerator) -> T
    ) -> T? {
        Int.random(in: 0..<3, using: &rng) == 0 ? nil : draw(&rng)
    }

    static func int64(_ rng: inout any SeededRandomNumberGenerator) -> Int64 {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: one(of: [0, 1, -1, .min, .max], &rng)
        case 1: Int64.random(in: -300...300, using: &rng)
        default: Int64.random(in: .min ... .max, using: &rng)
        }
    }

    static func int(_ rng: inout any SeededRandomNumberGenerator) -> Int { Int(int64(&rng)) }

    static func uint64(_ rng: inout any SeededRandomNumberGenerator) -> UInt64 {
        UInt64(bitPattern: int64(&rng))
    }

    static func int32(_ rng: inout any SeededRandomNumberGenerator) -> Int32 {
        Int.random(in: 0..<3, using: &rng) == 0
            ? one(of: [0, -50, -25300, .min, .max], &rng) : Int32.random(in: .min ... .max, using: &rng)
    }

    /// Any double but NaN (which no value equals): signed zeros, infinities, subnormals, ordinary values.
    static func double(_ rng: inout any SeededRandomNumberGenerator) -> Double {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            return one(of: [0, -0.0, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude], &rng)
        case 1: return Double.random(in: -1e9...1e9, using: &rng)
        default:
            let value = Double(bitPattern: UInt64.random(in: .min ... .max, using: &rng))
            return value.isNaN ? 1 : value
        }
    }

    static func date(_ rng: inout any SeededRandomNumberGenerator) -> Date {
        Date(timeIntervalSinceReferenceDate: double(&rng))
    }

    /// Characters from ASCII (controls and NUL included), Latin-1, the BMP beyond, the astral planes (emoji), and
    /// combining marks.
    static func string(_ rng: inout any SeededRandomNumberGenerator, maximumLength: Int = 12) -> String {
        let ranges: [ClosedRange<UInt32>] = [
            0x00...0x7F, 0x20...0x7E, 0xA0...0xFF, 0x370...0x3FF, 0x4E00...0x4E80,
            0x0300...0x036F, 0x1F600...0x1F64F,
        ]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<count(0...maximumLength, &rng) {
            let range = one(of: ranges, &rng)
            if let scalar = Unicode.Scalar(UInt32.random(in: range, using: &rng)) { scalars.append(scalar) }
        }
        return String(scalars)
    }

    static func data(_ rng: inout any SeededRandomNumberGenerator, maximumCount: Int = 40) -> Data {
        Data((0..<count(0...maximumCount, &rng)).map { _ in UInt8.random(in: .min ... .max, using: &rng) })
    }

    static func secureBytes(_ rng: inout any SeededRandomNumberGenerator) -> SecureBytes {
        var bytes = data(&rng)
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        return SecureBytes(bytes)
    }

    static func attributes(_ rng: inout any SeededRandomNumberGenerator) -> [String: KeychainValue] {
        var attributes: [String: KeychainValue] = [:]
        for _ in 0..<count(0...6, &rng) {
            let key =
                Int.random(in: 0..<2, using: &rng) == 0
                ? one(of: ["acct", "svce", "v_Data", "accc"], &rng) : string(&rng)
            attributes[key] = KeychainValue.arbitrary(using: &rng)
        }
        return attributes
    }

}

extension KeychainValue: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> KeychainValue {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: .string(Draw.string(&rng))
        case 1: .data(Draw.data(&rng))
        case 2: .integer(Draw.int64(&rng))
        case 3: .bool(Draw.bool(&rng))
        case 4: .date(Draw.date(&rng))
        case 5: .secret(Draw.secureBytes(&rng))
        case 6: .access(ItemAccess.arbitrary(using: &rng))
        default: .accessControl(AccessControlPolicy.arbitrary(using: &rng))
        }
    }
}

extension ItemAccess: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ItemAccess {
        let applications = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
            Draw.bool(&rng)
                ? TrustedApplication.caller
                : TrustedApplication(
                    applicationIdentifier: Draw.string(&rng), executable: Draw.string(&rng),
                    codeDigest: Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }))
        }
        return ItemAccess(descriptor: Draw.string(&rng), applications: applications)
    }
}

extension TrustPrompt: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> TrustPrompt {
        TrustPrompt(application: Draw.string(&rng), item: Draw.string(&rng), changed: Draw.bool(&rng))
    }
}

extension AccessControlPolicy: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AccessControlPolicy {
        AccessControlPolicy(
            protection: Draw.one(of: ["ak", "aku", "ck", "dku", ""], &rng), flags: Draw.uint64(&rng),
            boundStateHash: Draw.optional(&rng) { Draw.data(&$0) })
    }
}

extension KeychainStatus: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> KeychainStatus {
        KeychainStatus(KeychainStatus.Code(rawValue: Draw.int32(&rng)), Draw.string(&rng, maximumLength: 40))
    }
}

extension AuthenticationError: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AuthenticationError {
        AuthenticationError(
            AuthenticationError.Code(rawValue: Draw.int(&rng)), Draw.string(&rng),
            retryAfter: Draw.optional(&rng) {
                Duration(
                    secondsComponent: Draw.int64(&$0),
                    attosecondsComponent: Int64.random(in: 0..<1_000_000_000_000_000_000, using: &$0))
            },
            backendStatus: Draw.optional(&rng) {
                AuthenticationError.BackendStatus(
                    library: Draw.one(of: ["pam", "libfprint", "gio", "system"], &$0), code: Draw.int(&$0))
            })
    }
}

extension ScanRetryReason: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ScanRetryReason {
        ScanRetryReason(rawValue: Draw.int(&rng))
    }
}

extension ItemClass: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ItemClass {
        Draw.one(of: ItemClass.allCases, &rng)
    }
}

extension ReturnOptions: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ReturnOptions {
        ReturnOptions(rawValue: UInt8.random(in: 0...15, using: &rng))
    }
}

extension ItemMaterial: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ItemMaterial {
        ItemMaterial(attributes: Draw.attributes(&rng), data: Draw.secureBytes(&rng))
    }
}

extension ItemReference: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ItemReference {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: .certificate(ItemMaterial.arbitrary(using: &rng))
        case 1: .key(ItemMaterial.arbitrary(using: &rng))
        default:
            .identity(certificate: ItemMaterial.arbitrary(using: &rng), privateKey: ItemMaterial.arbitrary(using: &rng))
        }
    }
}

extension ItemResult: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ItemResult {
        ItemResult(
            itemClass: ItemClass.arbitrary(using: &rng), attributes: Draw.optional(&rng) { Draw.attributes(&$0) },
            data: Draw.optional(&rng) { Draw.secureBytes(&$0) },
            persistentReference: Draw.optional(&rng) { Draw.data(&$0) },
            reference: Draw.optional(&rng) { ItemReference.arbitrary(using: &$0) })
    }
}

extension ItemResults: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ItemResults {
        ItemResults(
            returns: ReturnOptions.arbitrary(using: &rng), isSingle: Draw.bool(&rng),
            items: (0..<Draw.count(0...4, &rng)).map { _ in ItemResult.arbitrary(using: &rng) })
    }
}

extension EngineEvent: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EngineEvent {
        EngineEvent(
            kind: Draw.one(of: [.added, .updated, .deleted, .locked, .unlocked], &rng),
            itemClass: Draw.optional(&rng) { ItemClass.arbitrary(using: &$0) },
            accessGroup: Draw.optional(&rng) { Draw.string(&$0) },
            persistentReference: Draw.optional(&rng) { Draw.data(&$0) })
    }
}

extension KeychainRequest: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> KeychainRequest {
        switch Int.random(in: 0..<9, using: &rng) {
        case 0: .add(Draw.attributes(&rng))
        case 1: .copyMatching(Draw.attributes(&rng))
        case 2: .update(query: Draw.attributes(&rng), attributes: Draw.attributes(&rng))
        case 3: .delete(Draw.attributes(&rng))
        case 4: .lock
        case 5: .lockState
        case 6: .exportBackup(password: Draw.secureBytes(&rng))
        case 7: .sealingState
        default: .importBackup(contents: Draw.data(&rng), password: Draw.secureBytes(&rng))
        }
    }
}

extension KeychainResponse: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> KeychainResponse {
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: .success
        case 1: .items(ItemResults.arbitrary(using: &rng))
        case 2: .locked(Draw.bool(&rng))
        case 4: .sealedUnderPasscode(Draw.bool(&rng))
        case 3: .exportedBackup(Draw.data(&rng), count: Draw.int(&rng), skipped: Draw.int(&rng))
        default: .backup(count: Draw.int(&rng), skipped: Draw.int(&rng))
        }
    }
}

extension AuthenticationContextID: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AuthenticationContextID {
        AuthenticationContextID(bytes: Array(Draw.data(&rng, maximumCount: 32)))
    }
}

extension X963KDFParameters: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> X963KDFParameters {
        X963KDFParameters(
            digest: Draw.one(of: DigestAlgorithm.allCases, &rng), sharedInfo: Draw.data(&rng),
            byteCount: Draw.int(&rng))
    }
}

extension ECIES.Variant: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ECIES.Variant {
        ECIES.Variant(iv: Draw.one(of: [.fromKDF, .zero], &rng), digest: Draw.one(of: DigestAlgorithm.allCases, &rng))
    }
}

extension KeyRequest: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> KeyRequest {
        let context = Draw.optional(&rng) { AuthenticationContextID.arbitrary(using: &$0) }
        return switch Int.random(in: 0..<6, using: &rng) {
        case 0:
            .generate(
                accessControl: Draw.optional(&rng) { AccessControlPolicy.arbitrary(using: &$0) },
                item: Draw.optional(&rng) { Draw.attributes(&$0) }, context: context)
        case 1: .sign(handle: Draw.data(&rng), digest: Draw.data(&rng), context: context)
        case 2:
            .decrypt(
                handle: Draw.data(&rng), ciphertext: Draw.data(&rng), variant: ECIES.Variant.arbitrary(using: &rng),
                context: context)
        case 3:
            .keyExchange(
                handle: Draw.data(&rng), peer: Draw.data(&rng),
                kdf: Draw.optional(&rng) { X963KDFParameters.arbitrary(using: &$0) }, context: context)
        case 4: .attestationIdentity
        default:
            .attest(
                handle: Draw.data(&rng), credentialBlob: Draw.data(&rng), encryptedSecret: Draw.data(&rng),
                context: context)
        }
    }
}

extension KeyResponse: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> KeyResponse {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: .generated(handle: Draw.data(&rng), publicKey: Draw.data(&rng))
        case 1: .signature(Draw.data(&rng))
        case 2: .secret(Draw.secureBytes(&rng))
        case 3:
            .attestationIdentity(
                certificate: Draw.data(&rng), endorsementKey: Draw.data(&rng), attestationKey: Draw.data(&rng))
        default:
            .attestation(keyPublicArea: Draw.data(&rng), statement: Draw.data(&rng), signature: Draw.data(&rng))
        }
    }
}

extension AccessControlOperation: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AccessControlOperation {
        Draw.one(of: [.readData, .update, .useKeySign, .useKeyDecrypt, .useKeyKeyExchange], &rng)
    }
}

extension EvaluationPolicy: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EvaluationPolicy {
        Draw.one(of: [.biometrics, .deviceOwner, .companion, .biometricsOrCompanion, .wristDetection, .passcode], &rng)
    }
}

extension AuthenticationMethod: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AuthenticationMethod {
        Draw.one(of: [.biometry, .passcode], &rng)
    }
}

extension Credential: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> Credential {
        Credential(
            method: AuthenticationMethod.arbitrary(using: &rng), time: Draw.date(&rng),
            enrolledSetHash: Draw.optional(&rng) { Draw.data(&$0) }, user: Draw.string(&rng), isReused: Draw.bool(&rng))
    }
}

extension PolicyAvailability: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PolicyAvailability {
        PolicyAvailability(
            readerPresent: Draw.bool(&rng), error: Draw.optional(&rng) { AuthenticationError.arbitrary(using: &$0) },
            domainState: Draw.optional(&rng) { Draw.data(&$0) })
    }
}

extension EnvironmentSnapshot: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EnvironmentSnapshot {
        EnvironmentSnapshot(
            readerPresent: Draw.bool(&rng), enrolled: Draw.bool(&rng), lockedOut: Draw.bool(&rng),
            stateHash: Draw.optional(&rng) { Draw.data(&$0) }, passcodeSet: Draw.bool(&rng))
    }
}

extension EvaluationPrompt: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EvaluationPrompt {
        EvaluationPrompt(
            reason: Draw.string(&rng, maximumLength: 60), fallbackTitle: Draw.optional(&rng) { Draw.string(&$0) },
            cancelTitle: Draw.optional(&rng) { Draw.string(&$0) })
    }
}

extension PromptAction: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PromptAction {
        Draw.one(of: [.cancel, .fallback], &rng)
    }
}

extension FingerprintPromptEvent: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> FingerprintPromptEvent {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: .waitingForFinger
        case 1: .retry(reason: ScanRetryReason.arbitrary(using: &rng))
        default: .notRecognized
        }
    }
}

extension PasscodePrompt: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PasscodePrompt {
        PasscodePrompt(text: Draw.string(&rng), echo: Draw.bool(&rng))
    }
}

extension PasscodeMessage: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PasscodeMessage {
        PasscodeMessage(isError: Draw.bool(&rng), text: Draw.string(&rng))
    }
}

extension Finger: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> Finger {
        Draw.one(of: Finger.allCases, &rng)
    }
}

extension PrintIdentifier: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PrintIdentifier {
        let bytes = Data((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &rng) })
        guard let identifier = try? PrintIdentifier(bytes: bytes) else {
            preconditionFailure("16 bytes are an identifier")
        }
        return identifier
    }
}

extension EnrolledPrintInfo: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EnrolledPrintInfo {
        EnrolledPrintInfo(
            identifier: PrintIdentifier.arbitrary(using: &rng), finger: Finger.arbitrary(using: &rng),
            username: Draw.string(&rng), driver: Draw.string(&rng), deviceID: Draw.string(&rng),
            enrolledAt: Draw.date(&rng))
    }
}

extension EnrollmentEvent: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EnrollmentEvent {
        switch Int.random(in: 0..<2, using: &rng) {
        case 0: .stageCompleted(completed: Draw.int(&rng), total: Draw.int(&rng))
        default:
            .retry(
                reason: ScanRetryReason.arbitrary(using: &rng), completed: Draw.int(&rng), total: Draw.int(&rng),
                detail: Draw.string(&rng))
        }
    }
}

extension EvaluationOptions: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> EvaluationOptions {
        EvaluationOptions(
            prompt: EvaluationPrompt.arbitrary(using: &rng), interactionNotAllowed: Draw.bool(&rng),
            reuseDuration: Draw.double(&rng))
    }
}

extension AuthenticationRequest: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AuthenticationRequest {
        let id = AuthenticationContextID.arbitrary(using: &rng)
        switch Int.random(in: 0..<13, using: &rng) {
        case 0: return .createContext
        case 1: return .invalidate(id)
        case 2: return .discard(id)
        case 3:
            return .evaluatePolicy(
                EvaluationPolicy.arbitrary(using: &rng), id, EvaluationOptions.arbitrary(using: &rng))
        case 4: return .canEvaluatePolicy(EvaluationPolicy.arbitrary(using: &rng), id)
        case 5:
            return .evaluateAccessControl(
                AccessControlPolicy.arbitrary(using: &rng), AccessControlOperation.arbitrary(using: &rng), id,
                EvaluationOptions.arbitrary(using: &rng))
        case 6: return .setApplicationPassword(Draw.optional(&rng) { Draw.secureBytes(&$0) }, id)
        case 7: return .isApplicationPasswordSet(id)
        case 8: return .biometryState
        case 9: return .evaluatedDomainState(id)
        case 10: return .environment
        case 11: return .unlockWithBiometry(EvaluationOptions.arbitrary(using: &rng))
        default: return .unlockWithPasscode(EvaluationOptions.arbitrary(using: &rng))
        }
    }
}

extension AuthenticationResponse: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AuthenticationResponse {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: .success
        case 1: .context(AuthenticationContextID.arbitrary(using: &rng))
        case 2: .credential(Credential.arbitrary(using: &rng))
        case 3: .availability(PolicyAvailability.arbitrary(using: &rng))
        case 4: .flag(Draw.bool(&rng))
        case 5: .biometryState(readerPresent: Draw.bool(&rng), stateHash: Draw.optional(&rng) { Draw.data(&$0) })
        case 6: .domainState(Draw.optional(&rng) { Draw.data(&$0) })
        default: .environment(EnvironmentSnapshot.arbitrary(using: &rng))
        }
    }
}

extension PromptEvent: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PromptEvent {
        let kind: PromptEvent.Kind =
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: .fingerprintBegan(EvaluationPrompt.arbitrary(using: &rng))
            case 5: .confirmation(Draw.uint64(&rng), TrustPrompt.arbitrary(using: &rng))
            case 1: .fingerprint(FingerprintPromptEvent.arbitrary(using: &rng))
            case 2: .fingerprintEnded
            case 3:
                .question(
                    Draw.uint64(&rng), EvaluationPrompt.arbitrary(using: &rng), PasscodePrompt.arbitrary(using: &rng),
                    isApplicationPassword: Draw.bool(&rng))
            default: .message(PasscodeMessage.arbitrary(using: &rng))
            }
        return PromptEvent(request: Draw.uint64(&rng), kind)
    }
}

extension PromptAnswer: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> PromptAnswer {
        let kind: PromptAnswer.Kind =
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: .action(PromptAction.arbitrary(using: &rng))
            case 1: .answer(question: Draw.uint64(&rng), Draw.optional(&rng) { Draw.secureBytes(&$0) })
            default: .choice(question: Draw.uint64(&rng), TrustChoice.allCases.randomElement(using: &rng))
            }
        return PromptAnswer(request: Draw.uint64(&rng), kind)
    }
}

extension ReaderInfo: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ReaderInfo {
        ReaderInfo(
            driver: Draw.string(&rng), deviceID: Draw.string(&rng), name: Draw.string(&rng),
            enrollStages: Draw.int(&rng), canIdentify: Draw.bool(&rng), hasStorage: Draw.bool(&rng))
    }
}

extension CallerInfo: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> CallerInfo {
        CallerInfo(
            mode: Draw.string(&rng), uid: UInt32.random(in: 0...UInt32.max, using: &rng), userName: Draw.string(&rng),
            pid: Int32.random(in: Int32.min...Int32.max, using: &rng), executable: Draw.string(&rng),
            executableDigest: Draw.optional(&rng) { Draw.data(&$0) },
            applicationIdentifier: Draw.optional(&rng) { Draw.string(&$0) },
            registrationFile: Draw.optional(&rng) { Draw.string(&$0) },
            accessGroups: (0..<Draw.count(0...3, &rng)).map { _ in Draw.string(&rng) },
            mayAccessAllGroups: Draw.bool(&rng),
            enclave: Draw.optional(&rng) { Draw.string(&$0) })
    }
}

extension VerificationEvent: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> VerificationEvent {
        Draw.bool(&rng)
            ? .waitingForFinger : .retry(reason: ScanRetryReason.arbitrary(using: &rng), detail: Draw.string(&rng))
    }
}

extension AdministrationRequest: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AdministrationRequest {
        let id = AuthenticationContextID.arbitrary(using: &rng)
        switch Int.random(in: 0..<9, using: &rng) {
        case 0: return .enroll(Finger.arbitrary(using: &rng), context: id)
        case 1: return .removePrint(PrintIdentifier.arbitrary(using: &rng), context: id)
        case 2: return .enrolledPrints
        case 3: return .reader
        case 4: return .verifyFinger
        case 5: return .passcodeRemoved(context: id)
        case 6: return .callerIdentity
        case 7: return .widenAccessGroups(context: id)
        default: return .closeReader
        }
    }
}

extension AdministrationEvent: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> AdministrationEvent {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: return .enrollment(EnrollmentEvent.arbitrary(using: &rng))
        case 1: return .verification(VerificationEvent.arbitrary(using: &rng))
        case 2: return .enrolled(EnrolledPrintInfo.arbitrary(using: &rng))
        case 3:
            let count = Draw.count(0...3, &rng)
            return .prints(
                (0..<count).map { _ in EnrolledPrintInfo.arbitrary(using: &rng) },
                stateHash: Draw.optional(&rng) { Draw.data(&$0) })
        case 4: return .reader(ReaderInfo.arbitrary(using: &rng))
        case 5: return .matched(EnrolledPrintInfo.arbitrary(using: &rng))
        case 6: return .caller(CallerInfo.arbitrary(using: &rng))
        default: return .success
        }
    }
}

extension ClientMessage: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ClientMessage {
        let id = Draw.uint64(&rng)
        switch Int.random(in: 0..<11, using: &rng) {
        case 0:
            return .hello(
                versions: (0..<Draw.count(0...3, &rng)).map { _ in Draw.uint64(&rng) },
                accessGroups: (0..<Draw.count(0...3, &rng)).map { _ in Draw.string(&rng) }, allGroups: Draw.bool(&rng))
        case 1:
            return .keychain(
                id, KeychainRequest.arbitrary(using: &rng), EvaluationOptions.arbitrary(using: &rng),
                interactive: Draw.bool(&rng))
        case 2:
            return .key(
                id, KeyRequest.arbitrary(using: &rng), EvaluationOptions.arbitrary(using: &rng),
                interactive: Draw.bool(&rng))
        case 3: return .authentication(id, AuthenticationRequest.arbitrary(using: &rng), interactive: Draw.bool(&rng))
        case 4: return .administration(id, AdministrationRequest.arbitrary(using: &rng))
        case 5: return .answer(PromptAnswer.arbitrary(using: &rng))
        case 6: return .subscribeKeychainEvents(id)
        case 7: return .subscribeEnvironment(id)
        case 8: return .login(id, LoginRequest.arbitrary(using: &rng))
        case 9: return .registerAgent(id)
        default: return .unsubscribe(id)
        }
    }
}

extension LoginRequest: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> LoginRequest {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: return .sessionOpened(password: Draw.optional(&rng) { Draw.secureBytes(&$0) })
        case 1: return .sessionClosed
        case 2: return .fingerOffered
        case 3: return .verifyFinger
        default: return .passwordChanged(old: Draw.secureBytes(&rng), new: Draw.secureBytes(&rng))
        }
    }
}

extension ServerMessage: Arbitrary {
    static func arbitrary(using rng: inout any SeededRandomNumberGenerator) -> ServerMessage {
        let id = Draw.uint64(&rng)
        switch Int.random(in: 0..<17, using: &rng) {
        case 0: return .welcome(version: Draw.uint64(&rng))
        case 1: return .keychain(id, KeychainResponse.arbitrary(using: &rng))
        case 2: return .key(id, KeyResponse.arbitrary(using: &rng))
        case 3: return .authentication(id, AuthenticationResponse.arbitrary(using: &rng))
        case 4: return .administration(id, AdministrationEvent.arbitrary(using: &rng))
        case 5: return .progress(id, AdministrationEvent.arbitrary(using: &rng))
        case 6: return .keychainFailure(id, KeychainStatus.arbitrary(using: &rng))
        case 7: return .authenticationFailure(id, AuthenticationError.arbitrary(using: &rng))
        case 8: return .prompt(PromptEvent.arbitrary(using: &rng))
        case 9: return .keychainEvent(id, EngineEvent.arbitrary(using: &rng))
        case 10: return .environment(id, EnvironmentSnapshot.arbitrary(using: &rng))
        case 11:
            return .login(
                id,
                LoginOutcome(
                    unlocked: Draw.bool(&rng), sessions: Draw.int(&rng), note: Draw.optional(&rng) { Draw.string(&$0) },
                    finger: Draw.optional(&rng) { FingerAnswer.allCases.randomElement(using: &$0)! })
            )
        case 12:
            return .agentRegistered(
                id,
                AgentRegistration(
                    serves: Draw.string(&rng), pinentry: Draw.string(&rng), mayChoosePinentry: Draw.bool(&rng),
                    replaced: Draw.optional(&rng) { Draw.int32(&$0) }))
        case 13: return .agentPrompt(PromptEvent.arbitrary(using: &rng), CallerInfo.arbitrary(using: &rng))
        case 14: return .agentPromptEnded(id)
        case 15: return .agentNotice(Draw.string(&rng))
        default: return .refused(Draw.string(&rng))
        }
    }
}
