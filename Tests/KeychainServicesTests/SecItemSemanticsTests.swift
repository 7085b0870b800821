import Authenticators
import Foundation
import KeychainServices
import SecurityClient
import SecurityProtocol
import SecurityServer
import SwiftKeychain
import TestSupport
import Testing
import WorkThreads

@Suite("SecItem semantics")
struct SecItemSemanticsTests {
    // MARK: Primary keys

    @Test func sameAccountAndServiceIsADuplicate() throws {
        try TestStore().with {
            #expect(addGenericPassword(account: "a") == errSecSuccess)
            #expect(addGenericPassword(account: "a", password: "other") == errSecDuplicateItem)
            #expect(addGenericPassword(account: "b") == errSecSuccess)
            #expect(addGenericPassword(account: "a", service: "other") == errSecSuccess)
            #expect(password(account: "a") == .success("secret"))
        }
    }

    @Test func nonPrimaryAttributesDoNotMakeAnItemUnique() throws {
        try TestStore().with {
            #expect(addGenericPassword(account: "a", extra: [kSecAttrLabel as String: "one"]) == errSecSuccess)
            #expect(
                addGenericPassword(
                    account: "a", extra: [kSecAttrLabel as String: "two", kSecAttrComment as String: "c"])
                    == errSecDuplicateItem)
        }
    }

    @Test func anOmittedPrimaryKeyAttributeEqualsItsEmptyDefault() throws {
        try TestStore().with {
            let withoutAccount: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
            ]
            #expect(SecItemAdd(withoutAccount as CFDictionary, nil) == errSecSuccess)
            let emptyAccount: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "s",
                kSecAttrAccount as String: "",
            ]
            #expect(SecItemAdd(emptyAccount as CFDictionary, nil) == errSecDuplicateItem)
            let inet: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "h"]
            #expect(SecItemAdd(inet as CFDictionary, nil) == errSecSuccess)
            var zeroPort = inet
            zeroPort[kSecAttrPort as String] = 0
            #expect(SecItemAdd(zeroPort as CFDictionary, nil) == errSecDuplicateItem)
        }
    }

    @Test func internetPasswordPrimaryKeyCoversEveryPart() throws {
        try TestStore().with {
            let base: [String: Any] = [
                kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.com",
                kSecAttrAccount as String: "u", kSecAttrProtocol as String: kSecAttrProtocolHTTPS,
                kSecAttrPort as String: 443, kSecAttrPath as String: "/", kSecValueData as String: Data("p".utf8),
            ]
            #expect(SecItemAdd(base as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(base as CFDictionary, nil) == errSecDuplicateItem)
            let variations: [(String, Any)] = [
                (kSecAttrPort as String, 8443), (kSecAttrPath as String, "/x"),
                (kSecAttrProtocol as String, kSecAttrProtocolHTTP), (kSecAttrSecurityDomain as String, "realm"),
                (kSecAttrAuthenticationType as String, kSecAttrAuthenticationTypeHTMLForm),
                (kSecAttrServer as String, "other.example"), (kSecAttrAccount as String, "v"),
            ]
            for (key, value) in variations {
                var item = base
                item[key] = value
                #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess, "\(key)")
            }
        }
    }

    @Test func certificateAndKeyPrimaryKeys() throws {
        try TestStore().with {
            let certificate: [String: Any] = [
                kSecClass as String: kSecClassCertificate, kSecAttrIssuer as String: Data([1]),
                kSecAttrSerialNumber as String: Data([2]), kSecValueData as String: Data([0x30, 1, 0]),
            ]
            #expect(SecItemAdd(certificate as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(certificate as CFDictionary, nil) == errSecDuplicateItem)
            var otherSerial = certificate
            otherSerial[kSecAttrSerialNumber as String] = Data([3])
            #expect(SecItemAdd(otherSerial as CFDictionary, nil) == errSecSuccess)

            let key: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                kSecAttrApplicationTag as String: Data("tag".utf8), kSecValueData as String: Data([9, 9]),
            ]
            #expect(SecItemAdd(key as CFDictionary, nil) == errSecSuccess)
            #expect(SecItemAdd(key as CFDictionary, nil) == errSecDuplicateItem)
            var publicKey = key
            publicKey[kSecAttrKeyClass as String] = kSecAttrKeyClassPublic
            #expect(SecItemAdd(publicKey as CFDictionary, nil) == errSecSuccess)
        }
    }

    // MARK: Match limits and result shapes

    @Test func matchLimitOneAllAndN() throws {
        try TestStore().with {
            for index in 0..<5 { addGenericPassword(account: "a\(index)") }
            let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true]
            let (_, one) = copyMatching(base)
            #expect(one is Data)
            var all = base
            all[kSecMatchLimit as String] = kSecMatchLimitAll
            #expect((copyMatching(all).1 as? [Data])?.count == 5)
            var three = base
            three[kSecMatchLimit as String] = 3
            #expect((copyMatching(three).1 as? [Data])?.count == 3)
            var explicitOne = base
            explicitOne[kSecMatchLimit as String] = kSecMatchLimitOne
            #expect(copyMatching(explicitOne).1 is Data)
            var bad = base
            bad[kSecMatchLimit as String] = 0
            #expect(copyMatching(bad).0 == errSecParam)
        }
    }

    @Test func resultShapesForEveryReturnCombination() throws {
        try TestStore().with {
            addGenericPassword(account: "a", password: "pw")
            let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]
            let (noReturnStatus, noReturn) = copyMatching(base)
            #expect(noReturnStatus == errSecSuccess && noReturn == nil)

            var attributesOnly = base
            attributesOnly[kSecReturnAttributes as String] = true
            let attributes = copyMatching(attributesOnly).1 as? [String: Any]
            #expect(attributes?[kSecAttrAccount as String] as? String == "a")
            #expect(attributes?[kSecClass as String] as? String == "genp")
            #expect(attributes?[kSecAttrAccessible as String] as? String == "ak")
            #expect(attributes?[kSecAttrCreationDate as String] is Date)
            #expect(attributes?[kSecValueData as String] == nil)

            var persistentOnly = base
            persistentOnly[kSecReturnPersistentRef as String] = true
            let persistent = copyMatching(persistentOnly).1 as? Data
            #expect(persistent != nil && persistent != Data("pw".utf8))

            var dataAndAttributes = base
            dataAndAttributes[kSecReturnData as String] = true
            dataAndAttributes[kSecReturnAttributes as String] = true
            dataAndAttributes[kSecReturnPersistentRef as String] = true
            let combined = copyMatching(dataAndAttributes).1 as? [String: Any]
            #expect(combined?[kSecValueData as String] as? Data == Data("pw".utf8))
            #expect(combined?[kSecValuePersistentRef as String] as? Data == persistent)
            #expect(combined?[kSecAttrService as String] as? String == "svc")

            var dataAndPersistent = base
            dataAndPersistent[kSecReturnData as String] = true
            dataAndPersistent[kSecReturnPersistentRef as String] = true
            let pair = copyMatching(dataAndPersistent).1 as? [String: Any]
            #expect(pair?.count == 2)

            var arrayOfDictionaries = dataAndAttributes
            arrayOfDictionaries[kSecMatchLimit as String] = kSecMatchLimitAll
            #expect((copyMatching(arrayOfDictionaries).1 as? [[String: Any]])?.count == 1)

            // Apple: kSecReturnRef on a password is not an error; there is simply no reference.
            var passwordRef = base
            passwordRef[kSecReturnRef as String] = true
            let (refStatus, refResult) = copyMatching(passwordRef)
            #expect(refStatus == errSecSuccess)
            #expect(refResult == nil)
        }
    }

    @Test func referencesForKeysCertificatesAndIdentities() throws {
        try TestStore().with {
            let hash = Data(repeating: 0xAB, count: 20)
            let der = Data([0x30, 3, 1, 2, 3])
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassCertificate, kSecAttrPublicKeyHash as String: hash,
                        kSecAttrLabel as String: "me", kSecValueData as String: der,
                    ] as CFDictionary, nil) == errSecSuccess)
            #expect(
                SecItemAdd(
                    [
                        kSecClass as String: kSecClassKey, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                        kSecAttrApplicationLabel as String: hash, kSecAttrLabel as String: "me",
                        kSecValueData as String: Data([7, 7, 7]),
                    ] as CFDictionary, nil) == errSecSuccess)

            let certificate = copyMatching([kSecClass as String: kSecClassCertificate, kSecReturnRef as String: true]).1
            #expect((certificate as? SecCertificate).map { SecCertificateCopyData($0) as Data } == der)
            let key = copyMatching([kSecClass as String: kSecClassKey, kSecReturnRef as String: true]).1
            #expect(key is SecKey)

            let (status, identityResult) = copyMatching([
                kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true,
            ])
            #expect(status == errSecSuccess)
            let identity = try #require(identityResult as? SecIdentity)
            var identityCertificate: SecCertificate?
            #expect(SecIdentityCopyCertificate(identity, &identityCertificate) == errSecSuccess)
            #expect(identityCertificate.map { SecCertificateCopyData($0) as Data } == der)

            #expect(SecItemDelete([kSecClass as String: kSecClassIdentity] as CFDictionary) == errSecSuccess)
            #expect(copyMatching([kSecClass as String: kSecClassKey]).0 == errSecItemNotFound)
            #expect(copyMatching([kSecClass as String: kSecClassCertificate]).0 == errSecItemNotFound)
        }
    }

    @Test func certificatesCanBeAddedByReference() throws {
        try TestStore().with {
            let der = Data([0x30, 0x03, 0x02, 0x01, 0x05])
            let certificate = try #require(SecCertificateCreateWithData(nil, der as CFData))
            #expect(SecCertificateCreateWithData(nil, Data("not der".utf8) as CFData) == nil)
            #expect(
                SecItemAdd([kSecValueRef as String: certificate, kSecAttrLabel as String: "c"] as CFDictionary, nil)
                    == errSecSuccess)
            #expect(SecItemAdd([kSecValueRef as String: certificate] as CFDictionary, nil) == errSecDuplicateItem)
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: "c", kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(result as? Data == der)
            #expect(
                SecItemAdd(
                    [kSecClass as String: kSecClassGenericPassword, kSecValueRef as String: certificate]
                        as CFDictionary,
                    nil) == errSecParam)
            #expect(
                copyMatching([kSecClass as String: kSecClassCertificate, kSecValueRef as String: certificate]).0
                    == errSecParam)
        }
    }

    @Test func addCanReturnWhatItStored() throws {
        try TestStore().with {
            var result: CFTypeRef?
            let status = SecItemAdd(
                [
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                    kSecValueData as String: Data("x".utf8), kSecReturnAttributes as String: true,
                ] as CFDictionary, &result)
            #expect(status == errSecSuccess)
            #expect((result as? [String: Any])?[kSecAttrAccount as String] as? String == "a")
        }
    }

    // MARK: Matching

    @Test func caseInsensitiveMatchingOnlyWhenAsked() throws {
        try TestStore().with {
            addGenericPassword(account: "Alice")
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "ALICE",
                kSecAttrService as String: "svc",
            ]
            #expect(copyMatching(query).0 == errSecItemNotFound)
            var insensitive = query
            insensitive[kSecMatchCaseInsensitive as String] = true
            #expect(copyMatching(insensitive).0 == errSecSuccess)
        }
    }

    @Test func queriesMatchOnEveryGivenAttribute() throws {
        try TestStore().with {
            addGenericPassword(account: "a", extra: [kSecAttrLabel as String: "L1"])
            addGenericPassword(account: "b", extra: [kSecAttrLabel as String: "L2"])
            #expect(genericPasswordCount([kSecAttrLabel as String: "L2"]) == 1)
            #expect(genericPasswordCount([kSecAttrLabel as String: "L3"]) == 0)
            #expect(genericPasswordCount([kSecAttrService as String: "svc"]) == 2)
        }
    }

    // MARK: Update and delete

    @Test func updateChangesAttributesAndDataAndMovesTheModificationDate() throws {
        try TestStore().with {
            addGenericPassword(account: "a", password: "old")
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]
            var withAttributes = query
            withAttributes[kSecReturnAttributes as String] = true
            let before = try #require(copyMatching(withAttributes).1 as? [String: Any])
            Thread.sleep(forTimeInterval: 0.01)
            let changes: [String: Any] = [
                kSecAttrLabel as String: "new label", kSecValueData as String: Data("new".utf8),
            ]
            #expect(SecItemUpdate(query as CFDictionary, changes as CFDictionary) == errSecSuccess)
            let after = try #require(copyMatching(withAttributes).1 as? [String: Any])
            #expect(after[kSecAttrLabel as String] as? String == "new label")
            #expect(password(account: "a") == .success("new"))
            let created = try #require(before[kSecAttrCreationDate as String] as? Date)
            #expect(after[kSecAttrCreationDate as String] as? Date == created)
            let modifiedBefore = try #require(before[kSecAttrModificationDate as String] as? Date)
            let modifiedAfter = try #require(after[kSecAttrModificationDate as String] as? Date)
            #expect(modifiedAfter > modifiedBefore)
        }
    }

    @Test func updateThatCreatesAClashIsADuplicateAndChangesNothing() throws {
        try TestStore().with {
            addGenericPassword(account: "a", password: "pa")
            addGenericPassword(account: "b", password: "pb")
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "b"]
            #expect(
                SecItemUpdate(query as CFDictionary, [kSecAttrAccount as String: "a"] as CFDictionary)
                    == errSecDuplicateItem)
            #expect(password(account: "a") == .success("pa"))
            #expect(password(account: "b") == .success("pb"))
            let everything: [String: Any] = [kSecClass as String: kSecClassGenericPassword]
            #expect(
                SecItemUpdate(everything as CFDictionary, [kSecAttrAccount as String: "c"] as CFDictionary)
                    == errSecDuplicateItem)
            #expect(genericPasswordCount() == 2)
        }
    }

    @Test func updateAcceptsOnlyRealAttributes() throws {
        try TestStore().with {
            addGenericPassword(account: "a")
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a"]
            for changes: [String: Any] in [
                [:], [kSecClass as String: kSecClassInternetPassword], [kSecReturnData as String: true],
                [kSecAttrServer as String: "not a genp attribute"], ["bogus": 1], [kSecAttrAccount as String: 5],
                [kSecAttrCreationDate as String: Date()], [kSecMatchLimit as String: kSecMatchLimitAll],
            ] {
                #expect(SecItemUpdate(query as CFDictionary, changes as CFDictionary) == errSecParam, "\(changes)")
            }
            var withReturn = query
            withReturn[kSecReturnData as String] = true
            #expect(
                SecItemUpdate(withReturn as CFDictionary, [kSecAttrLabel as String: "x"] as CFDictionary) == errSecParam
            )
            let missing: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "zz",
            ]
            #expect(
                SecItemUpdate(missing as CFDictionary, [kSecAttrLabel as String: "x"] as CFDictionary)
                    == errSecItemNotFound)
        }
    }

    @Test func deleteRemovesEveryMatch() throws {
        try TestStore().with {
            for index in 0..<4 { addGenericPassword(account: "a\(index)") }
            addGenericPassword(account: "keep", service: "other")
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
            ]
            #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)
            #expect(genericPasswordCount() == 1)
            #expect(SecItemDelete(query as CFDictionary) == errSecItemNotFound)
        }
    }

    // MARK: Synchronizable

    @Test func synchronizableItemsAreSeenOnlyWhenAsked() throws {
        try TestStore().with {
            addGenericPassword(account: "local")
            addGenericPassword(account: "synced", extra: [kSecAttrSynchronizable as String: true])
            #expect(genericPasswordCount() == 1)
            #expect(genericPasswordCount([kSecAttrSynchronizable as String: true]) == 1)
            #expect(genericPasswordCount([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]) == 2)
            #expect(
                addGenericPassword(account: "local", extra: [kSecAttrSynchronizable as String: true]) == errSecSuccess)
            #expect(
                addGenericPassword(account: "x", extra: [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny])
                    == errSecParam)
            #expect(password(account: "synced").map { _ in true } == .failure(StatusError(status: errSecItemNotFound)))
            #expect(
                password(account: "synced", extra: [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny])
                    == .success("secret"))
        }
    }

    /// Apple's securityd stores a synchronizable item whatever its accessibility: its add path
    /// (`SecServerItemAddWithCustomDb`, keychain/securityd/SecItemServer.c, Security-61901.0.87) refuses synchronizable
    /// items only to app clips and in the system keychain, and a `…ThisDeviceOnly` item simply never leaves the
    /// device. Apple's documentation says such a pair "may" not be used; the runtime takes it (a widely used wrapper's
    /// tests add exactly that on iOS 13–17), and so does this keychain, which syncs nothing anyway.
    @Test func synchronizableThisDeviceOnlyItemsAreStoredAsApplesRuntimeDoes() throws {
        try TestStore().with {
            let classes = [
                kSecAttrAccessibleWhenUnlockedThisDeviceOnly, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                kSecAttrAccessibleAlwaysThisDeviceOnly,
            ]
            for (index, accessible) in classes.enumerated() {
                let extra: [String: Any] = [
                    kSecAttrAccessible as String: accessible, kSecAttrSynchronizable as String: true,
                ]
                #expect(addGenericPassword(account: "a\(index)", extra: extra) == errSecSuccess)
                #expect(
                    password(account: "a\(index)", extra: [kSecAttrSynchronizable as String: true])
                        == .success("secret"))
            }
            addGenericPassword(
                account: "b", extra: [kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly])
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "b"]
            #expect(
                SecItemUpdate(query as CFDictionary, [kSecAttrSynchronizable as String: true] as CFDictionary)
                    == errSecSuccess)
            #expect(genericPasswordCount([kSecAttrSynchronizable as String: true]) == 4)
            #expect(genericPasswordCount() == 0)
        }
    }

    // MARK: Constants in Foundation's containers

    /// A result read as `[AnyHashable: Any]` and looked up by constant, as wrappers written for Apple's platforms
    /// do (their "all keys" call), finds the value by either spelling; a query built with constants equals the same
    /// query written with strings inside `NSDictionary`; a constant and its string are one key of a `Set`.
    @Test func constantsFindResultsAndCompareEqualInFoundationContainers() throws {
        try TestStore().with {
            addGenericPassword(account: "alice", service: "mail")
            addGenericPassword(account: "bob", service: "mail")
            let (status, result) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail",
                kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true,
            ])
            #expect(status == errSecSuccess)
            let items = try #require(result as? [[AnyHashable: Any]])
            #expect(items.compactMap { $0[kSecAttrAccount] as? String }.sorted() == ["alice", "bob"])
            #expect(items.compactMap { $0[kSecAttrAccount as String] as? String }.sorted() == ["alice", "bob"])
            #expect(items.first?[kSecAttrService] as? String == "mail")

            let built: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail",
                kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked,
            ]
            let written: [String: Any] = ["class": "genp", "svce": "mail", "pdmn": "ak"]
            #expect(NSDictionary(dictionary: built).isEqual(to: written))
            #expect(NSDictionary(dictionary: built) == NSDictionary(dictionary: written))
            let expected: [AnyHashable: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "mail",
                kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked,
            ]
            #expect(NSDictionary(dictionary: built).isEqual(to: expected))
            let keyed: [CFString: Any] = [kSecClass: kSecClassGenericPassword]
            #expect(NSDictionary(dictionary: keyed).isEqual(to: ["class": "genp"]))
            #expect(AnyHashable(kSecAttrAccount) == AnyHashable("acct"))
            #expect(Set<AnyHashable>([kSecAttrAccount, "acct"]).count == 1)
            #expect(kSecAttrAccount as String == "acct")
        }
    }

    // MARK: Access groups and protection classes

    @Test func accessGroupsSeparateCallersAndDefaultToTheFirstGroup() throws {
        let store = TestStore()
        try store.with(groups: ["team.one", "shared"]) {
            addGenericPassword(account: "private")
            addGenericPassword(account: "common", extra: [kSecAttrAccessGroup as String: "shared"])
            let attributes =
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "private",
                    kSecReturnAttributes as String: true,
                ]).1 as? [String: Any]
            #expect(attributes?[kSecAttrAccessGroup as String] as? String == "team.one")
            #expect(
                addGenericPassword(account: "x", extra: [kSecAttrAccessGroup as String: "team.two"])
                    == errSecMissingEntitlement)
        }
        try store.with(groups: ["team.two", "shared"]) {
            #expect(genericPasswordCount() == 1)
            #expect(password(account: "common") == .success("secret"))
            #expect(password(account: "private").map { _ in true } == .failure(StatusError(status: errSecItemNotFound)))
            #expect(genericPasswordCount([kSecAttrAccessGroup as String: "team.one"]) == 0)
            let (status, _) = copyMatching([
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccessGroup as String: "team.one",
            ])
            #expect(status == errSecMissingEntitlement)
            #expect(
                SecItemDelete(
                    [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "private"]
                        as CFDictionary) == errSecItemNotFound)
        }
        try store.with(groups: []) {
            #expect(addGenericPassword(account: "none") == errSecMissingEntitlement)
        }
    }

    @Test func defaultProtectionClassIsWhenUnlocked() throws {
        try TestStore().with {
            addGenericPassword(account: "a")
            let attributes =
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true,
                ]).1 as? [String: Any]
            #expect(attributes?[kSecAttrAccessible as String] as? String == kSecAttrAccessibleWhenUnlocked as String)
            #expect(attributes?[kSecAttrSynchronizable as String] as? Bool == false)
        }
    }

    @Test func lockedClassesAreNotReadableAndOthersAre() throws {
        let store = TestStore()
        let client = try store.passcodeClient()
        try store.with(client) {
            addGenericPassword(account: "ak")
            addGenericPassword(account: "ck", extra: [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock])
            addGenericPassword(account: "dk", extra: [kSecAttrAccessible as String: kSecAttrAccessibleAlways])
            _ = try client.sendBlocking(.lock)
            #expect(
                password(account: "ak").map { _ in true } == .failure(StatusError(status: errSecInteractionNotAllowed)))
            #expect(password(account: "ck") == .success("secret"))
            #expect(password(account: "dk") == .success("secret"))
            #expect(addGenericPassword(account: "new") == errSecInteractionNotAllowed)
            #expect(
                addGenericPassword(account: "new-dk", extra: [kSecAttrAccessible as String: kSecAttrAccessibleAlways])
                    == errSecSuccess)
        }
        try store.with {
            #expect(
                password(account: "ak").map { _ in true } == .failure(StatusError(status: errSecInteractionNotAllowed)))
        }
        _ = try BlockingBridge.wait {
            try await client.send(
                .unlockWithPasscode(EvaluationOptions(prompt: .init(reason: "test"))),
                presenter: client.defaultPresenter)
        }
        try store.with(client) {
            #expect(password(account: "ak") == .success("secret"))
        }
    }

    @Test func passcodeOnlyItemsNeedAPasscodeAndGoWithIt() async throws {
        let store = TestStore()
        let extra = [kSecAttrAccessible as String: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly]
        // No PAM service: no passcode is known to be set. (Daemon mode: the daemon of the store has the service.)
        if TestMode.current == .embedded {
            try store.with(try store.client()) {
                #expect(addGenericPassword(account: "p", extra: extra) == errSecAuthFailed)
            }
        }
        // A passcode success records that one is set.
        let client = try store.passcodeClient(presenter: PasscodeAnswers("secret", "secret"))
        guard case .context(let context) = try await client.send(.createContext) else { return }
        let options = EvaluationOptions(prompt: .init(reason: "test"))
        _ = try await client.send(.evaluatePolicy(.passcode, context, options), presenter: PasscodeAnswers("secret"))
        try store.with(client) {
            #expect(addGenericPassword(account: "p", extra: extra) == errSecSuccess)
            #expect(password(account: "p") == .success("secret"))
        }
        // Removing the passcode needs it (a recent passcode credential), then destroys the items.
        guard case .context(let fresh) = try await client.send(.createContext) else { return }
        await #expect(throws: AuthenticationError.self) { _ = try await client.send(.passcodeRemoved(context: fresh)) }
        try store.with(client) { #expect(password(account: "p") == .success("secret")) }
        _ = try await client.send(.passcodeRemoved(context: context))
        try store.with(client) {
            #expect(password(account: "p").map { _ in true } == .failure(StatusError(status: errSecItemNotFound)))
        }
    }

    @Test func accessControlIsStoredAndItsDataNeverLeaks() throws {
        try TestStore().with {
            var error: Unmanaged<CFError>?
            let access = try #require(
                SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .userPresence, &error))
            #expect(
                addGenericPassword(
                    account: "guarded", password: "top secret", extra: [kSecAttrAccessControl as String: access])
                    == errSecSuccess)
            let attributes =
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
                    kSecReturnAttributes as String: true,
                ]).1 as? [String: Any]
            #expect(attributes?[kSecAttrAccessControl as String] as? SecAccessControl == access)
            #expect(attributes?[kSecAttrAccessible as String] as? String == "aku")
            #expect(
                password(account: "guarded").map { _ in true }
                    == .failure(StatusError(status: errSecInteractionNotAllowed)))
            #expect(
                password(account: "guarded", extra: [kSecUseAuthenticationUI as String: kSecUseAuthenticationUISkip])
                    .map { _ in true }
                    == .failure(StatusError(status: errSecItemNotFound)))
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "guarded",
            ]
            #expect(
                SecItemUpdate(query as CFDictionary, [kSecValueData as String: Data()] as CFDictionary)
                    == errSecInteractionNotAllowed)
            #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)

            #expect(SecAccessControlCreateWithFlags(nil, "bogus", .userPresence, &error) == nil)
            #expect((error?.takeRetainedValue())?.code == Int(errSecParam))
            #expect(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlocked, [.or, .and], nil) == nil)
            #expect(
                addGenericPassword(
                    account: "mismatch",
                    extra: [
                        kSecAttrAccessControl as String: access, kSecAttrAccessible as String: kSecAttrAccessibleAlways,
                    ])
                    == errSecParam)
        }
    }

    // MARK: Dates and persistent references

    @Test func datesAreSetByTheKeychainAndReadOnly() throws {
        try TestStore().with {
            let start = Date()
            addGenericPassword(account: "a")
            let attributes =
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecReturnAttributes as String: true,
                ]).1 as? [String: Any]
            let created = try #require(attributes?[kSecAttrCreationDate as String] as? Date)
            #expect(abs(created.timeIntervalSince(start)) < 60)
            #expect(attributes?[kSecAttrModificationDate as String] as? Date == created)
            #expect(addGenericPassword(account: "b", extra: [kSecAttrCreationDate as String: Date()]) == errSecParam)
        }
    }

    @Test func persistentReferencesStayValidAcrossRestarts() throws {
        let store = TestStore()
        let reference = try store.with {
            addGenericPassword(account: "a", password: "persisted")
            addGenericPassword(account: "b")
            return try #require(
                copyMatching([
                    kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "a",
                    kSecReturnPersistentRef as String: true,
                ]).1 as? Data)
        }
        try store.with {
            let (status, result) = copyMatching([
                kSecValuePersistentRef as String: reference, kSecReturnData as String: true,
            ])
            #expect(status == errSecSuccess)
            #expect(result as? Data == Data("persisted".utf8))
        }
        try store.with(groups: ["someone.else"]) {
            #expect(copyMatching([kSecValuePersistentRef as String: reference]).0 == errSecItemNotFound)
        }
        try store.with {
            #expect(SecItemDelete([kSecValuePersistentRef as String: reference] as CFDictionary) == errSecSuccess)
            #expect(genericPasswordCount() == 1)
            #expect(copyMatching([kSecValuePersistentRef as String: Data("junk".utf8)]).0 == errSecParam)
        }
    }

    // MARK: Malformed input

    @Test func malformedInputIsAParameterErrorAndWritesNothing() throws {
        try TestStore().with {
            let malformed: [[String: Any]] = [
                [:],
                [kSecAttrAccount as String: "no class"],
                [kSecClass as String: "nope", kSecAttrAccount as String: "a"],
                [kSecClass as String: 42],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: 5],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrPort as String: 5],
                [kSecClass as String: kSecClassGenericPassword, "unknown": "x"],
                [kSecClass as String: kSecClassGenericPassword, kSecValueData as String: "a string, not data"],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccessible as String: "zz"],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrIsInvisible as String: "yes"],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: ["array"]],
                [kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll],
                [kSecClass as String: kSecClassIdentity],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrAccessGroup as String: ""],
                [kSecClass as String: kSecClassGenericPassword, kSecAttrPort as String: 1.5],
            ]
            for dictionary in malformed {
                #expect(SecItemAdd(dictionary as CFDictionary, nil) == errSecParam, "\(dictionary)")
            }
            let nonStringKey = NSDictionary(dictionary: [1: "x", "class": "genp"])
            #expect(SecItemAdd(nonStringKey, nil) == errSecParam)
            #expect(copyMatching([:]).0 == errSecParam)
            #expect(copyMatching([kSecClass as String: "nope"]).0 == errSecParam)
            #expect(
                copyMatching([kSecClass as String: kSecClassGenericPassword, kSecMatchPolicy as String: "x"]).0
                    == errSecParam)
            #expect(SecItemDelete([:] as CFDictionary) == errSecParam)
            #expect(genericPasswordCount([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]) == 0)
        }
    }
}
