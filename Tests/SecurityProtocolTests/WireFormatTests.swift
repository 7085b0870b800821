import Foundation
import SecureCrypto
import SecurityProtocol
import Testing

/// The hexadecimal digits of `bytes`.
func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

@Suite("Protocol codec: the wire format")
struct WireFormatTests {
    /// A daemon and its clients must agree on these bytes; a change to them is a change of format version.
    @Test func framesHaveThePinnedBytes() {
        // Version 1, the value's length, then the value.
        #expect(hex(frameBytes(KeychainRequest.lock)) == "01" + "00000005" + "05" + "00000000")
        // A record: field 1 the OSStatus (four bytes), field 2 the message.
        #expect(
            hex(frameBytes(KeychainStatus(.itemNotFound, "no")))
                == "01" + "00000010" + "01" + "00000004" + "ffff9d2c" + "02" + "00000002" + "6e6f")
        // A case with one associated value: the case's tag, then its payload record holding field 1.
        #expect(
            hex(frameBytes(KeyResponse.secret(SecureBytes([0xAA, 0xBB]))))
                == "01" + "0000000c" + "03" + "00000007" + "01" + "00000002" + "aabb")
        // A dictionary: the count, then each key and value with their lengths; the value is KeychainValue's case 1.
        #expect(
            hex(frameBytes(KeychainRequest.add(["acct": .string("a")])))
                == "01" + "00000025" + "01" + "00000020" + "01" + "0000001b" + "00000001" + "00000004" + "61636374"
                + "0000000b" + "01" + "00000006" + "01" + "00000001" + "61")
    }

    /// The hash variants of ECIES and the X9.63 KDF came later: their SHA-256 forms keep the first bytes, so a client
    /// or daemon built before them still reads and writes those requests.
    @Test func theSHA256KeyRequestsKeepTheFirstFormatsBytesAndTheOtherHashesDecode() throws {
        #expect(hex(frameBytes(ECIES.Variant.variableIV)) == "01" + "00000001" + "01")
        #expect(hex(frameBytes(ECIES.Variant.zeroIV)) == "01" + "00000001" + "02")
        #expect(
            hex(frameBytes(X963KDFParameters(sharedInfo: Data([0xAB]), byteCount: 32)))
                == "01" + "00000013" + "01" + "00000001" + "ab" + "02" + "00000008" + "0000000000000020")
        for digest in DigestAlgorithm.allCases {
            for iv in [ECIES.Variant.IV.fromKDF, .zero] {
                let variant = ECIES.Variant(iv: iv, digest: digest)
                #expect(try ECIES.Variant(decoding: variant.encoded()) == variant)
            }
            let parameters = X963KDFParameters(digest: digest, sharedInfo: Data("i".utf8), byteCount: 48)
            #expect(try X963KDFParameters(decoding: parameters.encoded()) == parameters)
        }
        // SHA-256 is the absent field: written out, it is not canonical.
        let written = handMadeFrame {
            $0.field(1, Data([0xAB]))
            $0.field(2, 32)
            $0.field(3, DigestAlgorithm.sha256)
        }
        #expect(decodingError(written, as: X963KDFParameters.self)?.code == .nonCanonical)
    }

    /// `PAM/pam_localauth.c` writes and reads these messages by hand (a PAM module carries no Swift runtime).
    @Test func theLoginMessagesThePAMModuleSpeakHaveThePinnedBytes() {
        // hello: versions [1], no access groups, allGroups false.
        #expect(
            hex(frameBytes(ClientMessage.hello(versions: [1], accessGroups: [], allGroups: false)))
                == "01" + "00000029" + "01" + "00000024" + "01" + "00000010" + "00000001" + "00000008"
                + "0000000000000001" + "02" + "00000004" + "00000000" + "03" + "00000001" + "00")
        // login(1, sessionOpened("pw")), sessionOpened without a password, sessionClosed, passwordChanged.
        let opened = ClientMessage.login(1, .sessionOpened(password: SecureBytes(Array("pw".utf8))))
        #expect(
            hex(frameBytes(opened))
                == "01" + "00000023" + "0a" + "0000001e" + "01" + "00000008" + "0000000000000001" + "02" + "0000000c"
                + "01" + "00000007" + "01" + "00000002" + "7077")
        #expect(
            hex(frameBytes(ClientMessage.login(1, .sessionOpened(password: nil))))
                == "01" + "0000001c" + "0a" + "00000017" + "01" + "00000008" + "0000000000000001" + "02" + "00000005"
                + "01" + "00000000")
        #expect(
            hex(frameBytes(ClientMessage.login(1, .sessionClosed)))
                == "01" + "0000001c" + "0a" + "00000017" + "01" + "00000008" + "0000000000000001" + "02" + "00000005"
                + "02" + "00000000")
        #expect(
            hex(
                frameBytes(ClientMessage.login(1, .passwordChanged(old: SecureBytes([0x61]), new: SecureBytes([0x62]))))
            )
                == "01" + "00000028" + "0a" + "00000023" + "01" + "00000008" + "0000000000000001" + "02" + "00000011"
                + "03" + "0000000c" + "01" + "00000001" + "61" + "02" + "00000001" + "62")
        // The finger steps of `pam_localauth.so finger`: fingerOffered, verifyFinger.
        #expect(
            hex(frameBytes(ClientMessage.login(1, .fingerOffered)))
                == "01" + "0000001c" + "0a" + "00000017" + "01" + "00000008" + "0000000000000001" + "02" + "00000005"
                + "04" + "00000000")
        #expect(
            hex(frameBytes(ClientMessage.login(1, .verifyFinger)))
                == "01" + "0000001c" + "0a" + "00000017" + "01" + "00000008" + "0000000000000001" + "02" + "00000005"
                + "05" + "00000000")
        // Their answer: login(1, {unlocked false, sessions 0, finger matched (2)}).
        #expect(
            hex(frameBytes(ServerMessage.login(1, LoginOutcome(unlocked: false, sessions: 0, finger: .matched))))
                == "01" + "00000037" + "0d" + "00000032" + "01" + "00000008" + "0000000000000001" + "02" + "00000020"
                + "01" + "00000001" + "00" + "02" + "00000008" + "0000000000000000" + "04" + "00000008"
                + "0000000000000002")
        // The answer: login(1, {unlocked true, sessions 2, note "n"}).
        #expect(
            hex(frameBytes(ServerMessage.login(1, LoginOutcome(unlocked: true, sessions: 2, note: "n"))))
                == "01" + "00000030" + "0d" + "0000002b" + "01" + "00000008" + "0000000000000001" + "02" + "00000019"
                + "01" + "00000001" + "01" + "02" + "00000008" + "0000000000000002" + "03" + "00000001" + "6e")
    }
}

@Suite("Protocol codec: secrets")
struct SecretTests {
    @Test func aDecodedPasswordIsItsOwnSecureBytesNotAViewOfTheFrame() throws {
        let password = SecureBytes(Array("correct horse".utf8))
        var frame = KeychainRequest.exportBackup(password: password).encoded()
        let decoded = try KeychainRequest(decoding: frame)
        frame.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        guard case .exportBackup(let decodedPassword) = decoded else {
            Issue.record("decoded \(decoded)")
            return
        }
        let secure: SecureBytes = decodedPassword
        #expect(secure == password)
    }

    @Test func anItemsDataInAnAddDecodesIntoItsOwnSecureBytes() throws {
        let secret = SecureBytes(Array("hunter2".utf8))
        var frame = KeychainRequest.add(["class": .string("genp"), "v_Data": .secret(secret)]).encoded()
        let decoded = try KeychainRequest(decoding: frame)
        frame.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        guard case .add(let attributes) = decoded, case .secret(let data)? = attributes["v_Data"] else {
            Issue.record("decoded \(decoded)")
            return
        }
        let secure: SecureBytes = data
        #expect(secure == secret)
    }

    @Test func aPromptAnswersPasscodeDecodesIntoItsOwnSecureBytes() throws {
        let passcode = SecureBytes(Array("1234".utf8))
        var frame = PromptAnswer(request: 7, .answer(question: 1, passcode)).encoded()
        let decoded = try PromptAnswer(decoding: frame)
        frame.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
        guard case .answer(let question, let secret?) = decoded.kind else {
            Issue.record("decoded \(decoded)")
            return
        }
        let secure: SecureBytes = secret
        #expect(decoded.request == 7 && question == 1)
        #expect(secure == passcode)
    }

    @Test func secretsInResponsesDecodeIntoSecureBytes() throws {
        let secret = SecureBytes(Array("shared secret".utf8))
        guard case .secret(let derived) = try KeyResponse(decoding: KeyResponse.secret(secret).encoded()) else {
            Issue.record("not a secret")
            return
        }
        let item = ItemResult(itemClass: .genericPassword, data: secret)
        let data: SecureBytes? = try ItemResult(decoding: item.encoded()).data
        #expect(derived == secret)
        #expect(data == secret)
    }

    @Test func decodedMessagesDoNotShowTheirSecrets() throws {
        let text = "hunter2-do-not-show"
        let secret = SecureBytes(Array(text.utf8))
        let messages: [any ProtocolCodable] = [
            KeyResponse.secret(secret),
            KeychainRequest.importBackup(contents: Data("LABACKUP1\n".utf8), password: secret),
            ItemResult(itemClass: .key, data: secret, reference: .key(ItemMaterial(attributes: [:], data: secret))),
        ]
        for message in messages {
            func roundTripped<T: ProtocolCodable>(_ value: T) throws -> T { try T(decoding: value.encoded()) }
            let decoded = try roundTripped(message)
            #expect(!String(describing: decoded).contains(text))
            #expect(!String(reflecting: decoded).contains(text))
        }
    }

    @Test func codecErrorsNameOffsetsNotContents() {
        let text = "hunter2-do-not-show"
        var frame = frameBytes(
            KeychainRequest.exportBackup(password: SecureBytes(Array(text.utf8))))
        frame.removeLast()
        let error = decodingError(frame, as: KeychainRequest.self)
        #expect(error?.code == .truncated)
        #expect(!(error?.description.contains("hunter2") ?? true))
    }
}
