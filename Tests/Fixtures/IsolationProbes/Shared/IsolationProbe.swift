import EmbeddedEngine
import Foundation
import KeychainServices
import LocalAuthentication
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityTransport

/// What the two isolation probes (`isolation-probe-a`, `isolation-probe-b`: two programs built for the purpose, so
/// their executables differ) do with Apple's keychain API on the client the environment selects, one command per
/// run, printing `key=value` lines for the test to read:
///
///     add SERVICE ACCOUNT SECRET [GROUP]    status=
///     read SERVICE ACCOUNT [GROUP]          status= value=
///     update SERVICE ACCOUNT SECRET [GROUP] status=
///     delete SERVICE ACCOUNT [GROUP]        status=
///     list [GROUP]                          status= accounts=a,b
///     ref SERVICE ACCOUNT                   status= ref=<hex persistent reference>
///     read-ref HEX                          status= value=
///     make-key TAG                          status=   (a permanent enclave P-256 key)
///     sign TAG [GROUP]                      status=   (finds the key by tag, signs)
///     whoami                                group= application= executable= sha256=
///     add-trusted SERVICE ACCOUNT SECRET GROUP [PROGRAM…]
///                                           status=   (kSecAttrAccess: this program and the PROGRAMs)
///     trusted SERVICE ACCOUNT GROUP         status= trusted=<application identifier> <path> (one line each)
///     flood SOCKET COUNT BYTES [hello]      opened= refused=, then `holding` and sleeps (an attacker's flood:
///                                           COUNT raw connections each declaring a frame of BYTES and sending all
///                                           but its last byte; after a hello first with `hello`)
///     authenticate REASON                   status=success, or status=<LAError code> error=<message>
///                                           (LAContext, .deviceOwnerAuthentication; with PROBE_HOLD set, then
///                                           `holding` and sleeps until killed, so that its memory can be read)
///     unread SOCKET COUNT                   written=, then `holding` and sleeps (a client that reads no answer:
///                                           stores a 1 MiB item, then writes COUNT lookups of every item with
///                                           their data and never reads; stops writing when the socket stays full
///                                           for 3 s)
///
/// With `PROBE_CHOICE` (deny, once, always) set, the program's presenter answers "<app> wants to use the item"
/// with it, printing `asked=<question>` and `changed=<bool>`, and gives `PROBE_PASSCODE` when the daemon then asks
/// for the passcode.
package enum IsolationProbe {
    /// Runs the command in `arguments` and exits with 0, or 2 for a command it does not know.
    package static func main(_ arguments: [String]) async -> Never {
        let environment = ProcessInfo.processInfo.environment
        guard let choice = environment["PROBE_CHOICE"], let socket = environment["LA_DAEMON_SOCKET"] else {
            await run(arguments)
            exit(0)
        }
        let presenter = ScriptedPresenter(choice: choice, passcode: environment["PROBE_PASSCODE"])
        do {
            let client = try SocketClient(
                path: socket, accessGroups: EmbeddedConfiguration.fromEnvironment().accessGroups,
                defaultPresenter: presenter)
            await KeychainClientSelection.$current.withValue(client) { await run(arguments) }
            exit(0)
        } catch {
            print("error=\(error)")
            exit(1)
        }
    }

    private static func run(_ arguments: [String]) async {
        switch arguments.first {
        case "add"?, "update"?:
            guard arguments.count >= 4 else { usage() }
            var item = identity(arguments[1], arguments[2], group: arguments.count > 4 ? arguments[4] : nil)
            let secret = Data(arguments[3].utf8)
            let status: OSStatus
            if arguments[0] == "add" {
                item[kSecValueData as String] = secret
                status = SecItemAdd(item as CFDictionary, nil)
            } else {
                status = SecItemUpdate(item as CFDictionary, [kSecValueData as String: secret] as CFDictionary)
            }
            print("status=\(status)")
        case "read"?:
            guard arguments.count >= 3 else { usage() }
            var query = identity(arguments[1], arguments[2], group: arguments.count > 3 ? arguments[3] : nil)
            query[kSecReturnData as String] = true
            printValue(query)
        case "delete"?:
            guard arguments.count >= 3 else { usage() }
            let query = identity(arguments[1], arguments[2], group: arguments.count > 3 ? arguments[3] : nil)
            print("status=\(SecItemDelete(query as CFDictionary))")
        case "list"?:
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll,
                kSecReturnAttributes as String: true,
            ]
            if arguments.count > 1 { query[kSecAttrAccessGroup as String] = arguments[1] }
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            let accounts = (result as? [[String: Any]] ?? []).compactMap { $0[kSecAttrAccount as String] as? String }
            print("status=\(status)")
            print("accounts=\(accounts.sorted().joined(separator: ","))")
        case "ref"?:
            guard arguments.count >= 3 else { usage() }
            var query = identity(arguments[1], arguments[2], group: nil)
            query[kSecReturnPersistentRef as String] = true
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            print("status=\(status)")
            print("ref=\((result as? Data)?.map { String(format: "%02x", $0) }.joined() ?? "")")
        case "read-ref"?:
            guard arguments.count >= 2, let reference = hexData(arguments[1]) else { usage() }
            printValue([kSecValuePersistentRef as String: reference, kSecReturnData as String: true])
        case "make-key"?:
            guard arguments.count >= 2 else { usage() }
            let access = SecAccessControlCreateWithFlags(
                kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)!
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                kSecAttrKeySizeInBits as String: 256,
                kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                kSecPrivateKeyAttrs as String: [
                    kSecAttrIsPermanent as String: true,
                    kSecAttrApplicationTag as String: Data(arguments[1].utf8),
                    kSecAttrAccessControl as String: access,
                ],
            ]
            var error: Unmanaged<CFError>?
            let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error)
            print("status=\(key == nil ? Int(CFErrorGetCode(error!.takeRetainedValue())) : 0)")
        case "sign"?:
            guard arguments.count >= 2 else { usage() }
            var query: [String: Any] = [
                kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data(arguments[1].utf8),
                kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecReturnRef as String: true,
            ]
            if arguments.count > 2 { query[kSecAttrAccessGroup as String] = arguments[2] }
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            guard status == errSecSuccess, let item else {
                print("status=\(status)")
                break
            }
            var error: Unmanaged<CFError>?
            let signature = SecKeyCreateSignature(
                item as! SecKey, .ecdsaSignatureMessageX962SHA256, Data("challenge".utf8) as CFData, &error)
            print("status=\(signature == nil ? Int(CFErrorGetCode(error!.takeRetainedValue())) : 0)")
        case "add-trusted"?:
            guard arguments.count >= 5 else { usage() }
            var applications: [SecTrustedApplication] = []
            for path in [nil] + arguments.dropFirst(5).map(Optional.some) {
                var application: SecTrustedApplication?
                let status =
                    path.map { SecTrustedApplicationCreateFromPath($0, &application) }
                    ?? SecTrustedApplicationCreateFromPath(nil, &application)
                guard status == errSecSuccess, let application else { usage() }
                applications.append(application)
            }
            var access: SecAccess?
            guard SecAccessCreate(arguments[1] as CFString, applications as CFArray, &access) == errSecSuccess else {
                usage()
            }
            var item = identity(arguments[1], arguments[2], group: arguments[4])
            item[kSecValueData as String] = Data(arguments[3].utf8)
            item[kSecAttrAccess as String] = access
            print("status=\(SecItemAdd(item as CFDictionary, nil))")
        case "trusted"?:
            guard arguments.count >= 4 else { usage() }
            var query = identity(arguments[1], arguments[2], group: arguments[3])
            query[kSecReturnAttributes as String] = true
            var result: CFTypeRef?
            print("status=\(SecItemCopyMatching(query as CFDictionary, &result))")
            let access = (result as? [String: Any])?[kSecAttrAccess as String] as? SecAccess
            for application in access?.trustedApplications ?? [] {
                print("trusted=\(application.applicationIdentifier) \(application.path)")
            }
        case "flood"?:
            guard arguments.count >= 4, let count = Int(arguments[2]), let bytes = Int(arguments[3]) else { usage() }
            flood(socket: arguments[1], count: count, bytes: bytes, hello: arguments.count > 4)
        case "unread"?:
            guard arguments.count >= 3, let count = Int(arguments[2]) else { usage() }
            unread(socket: arguments[1], count: count)
        case "authenticate"?:
            guard arguments.count >= 2 else { usage() }
            let context = LAContext()
            // PROBE_REASON_NUL: `\0` in the reason is a NUL (an argument cannot hold one), as a spoofing program
            // would send it.
            let reason =
                ProcessInfo.processInfo.environment["PROBE_REASON_NUL"] != nil
                ? arguments[1].replacingOccurrences(of: "\\0", with: "\u{0}") : arguments[1]
            do {
                _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: reason)
                print("status=success")
            } catch let error as LAError {
                print("status=\(error.code.rawValue)")
                print("error=\(error.localizedDescription)")
            } catch {
                print("status=other")
                print("error=\(error)")
            }
            if ProcessInfo.processInfo.environment["PROBE_HOLD"] != nil {
                print("holding")
                fflush(nil)
                while true { sleep(60) }
            }
        case "whoami"?:
            do {
                let client = try ClientSelection.fromEnvironment()
                guard case .caller(let info) = try await client.send(.callerIdentity) else { usage() }
                print("group=\(info.accessGroups.first ?? "")")
                print("groups=\(info.accessGroups.joined(separator: ","))")
                print("application=\(info.applicationIdentifier ?? "")")
                print("executable=\(info.executable)")
            } catch {
                print("error=\(error)")
                exit(1)
            }
        default:
            usage()
        }
    }

    /// Opens `count` connections that each declare a frame of `bytes` and send all of it but the last byte, then
    /// holds them: what a hostile program does to make the daemon buffer. Prints how many connections the daemon
    /// let send their bytes and how many it refused or closed, then `holding`, and sleeps until killed.
    private static func flood(socket path: String, count: Int, bytes: Int, hello: Bool) -> Never {
        var opened: [Int32] = []
        var refused = 0
        let chunk = [UInt8](repeating: 0x41, count: 1 << 20)
        for _ in 0..<count {
            guard let descriptor = try? SocketClient.connectBare(path).descriptor else {
                refused += 1
                continue
            }
            if hello {
                let frame = ClientMessage.hello(versions: [1], accessGroups: [], allGroups: false).encoded()
                var answer = [UInt8](repeating: 0, count: 4096)
                // The answer (a welcome, or a refusal after which the daemon closes: seen below) is read whole.
                guard FrameReader.write(frame, to: descriptor), recv(descriptor, &answer, answer.count, 0) > 0 else {
                    refused += 1
                    close(descriptor)
                    continue
                }
            }
            var header: [UInt8] = [1]
            withUnsafeBytes(of: UInt32(bytes).bigEndian) { header += $0 }
            var sent = send(descriptor, header, header.count, Int32(MSG_NOSIGNAL)) == header.count
            var left = bytes - 1
            while sent && left > 0 {
                let count = chunk.withUnsafeBytes {
                    send(descriptor, $0.baseAddress, min(left, $0.count), Int32(MSG_NOSIGNAL))
                }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { sent = false }
                left -= max(count, 0)
            }
            // The daemon closes a connection it refused: a peek then reads its end (or its refusal).
            usleep(20_000)
            var peek: UInt8 = 0
            let ended = recv(descriptor, &peek, 1, Int32(MSG_DONTWAIT | MSG_PEEK)) >= 0
            if sent && !ended {
                opened.append(descriptor)
            } else {
                refused += 1
                close(descriptor)
            }
        }
        // Written straight to the descriptor: the test reads the log while this process sleeps.
        let report = "opened=\(opened.count)\nrefused=\(refused)\nholding\n"
        _ = report.withCString { write(1, $0, strlen($0)) }
        while true { sleep(60) }
    }

    /// Says hello, stores a 1 MiB generic password, then writes `count` lookups of every item with their data
    /// without reading one answer: what a client does to make the daemon hold its answers. Prints how many lookups
    /// it wrote before the socket stayed full for 3 s, then `holding`, and sleeps until killed.
    private static func unread(socket path: String, count: Int) -> Never {
        guard let descriptor = try? SocketClient.connectBare(path).descriptor else {
            print("written=0\nerror=cannot connect to \(path)")
            exit(1)
        }
        let reader = FrameReader(descriptor: descriptor, limit: 1 << 20, version: MessageWriter.formatVersion)
        func exchange(_ message: ClientMessage) -> Bool {
            guard FrameReader.write(message.encoded(), to: descriptor),
                let answer = try? reader.next({ try ServerMessage(decoding: $0) })
            else { return false }
            switch answer {
            case .welcome, .keychain: return true
            default: return false
            }
        }
        let item: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("unread"), "acct": .string("large"),
            "v_Data": .secret(SecureBytes([UInt8](repeating: 0x5a, count: 1 << 20))),
        ]
        guard exchange(.hello(versions: [1], accessGroups: [], allGroups: false)),
            exchange(.keychain(1, .add(item), .nonInteractive, interactive: false))
        else {
            print("written=0\nerror=the daemon did not welcome or store")
            exit(1)
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        let query: [String: KeychainValue] = [
            "class": .string("genp"), "svce": .string("unread"), "m_Limit": .string("m_LimitAll"),
            "r_Data": .bool(true),
        ]
        var written = 0
        writing: for id in 0..<count {
            let frame = ClientMessage.keychain(
                UInt64(id + 2), .copyMatching(query), .nonInteractive, interactive: false
            )
            .encoded()
            let complete = frame.withUnsafeBytes { bytes -> Bool in
                var sent = 0
                while sent < bytes.count {
                    let count = send(descriptor, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                    if count > 0 {
                        sent += count
                        continue
                    }
                    guard count < 0, errno == EAGAIN || errno == EINTR else { return false }
                    var writable = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    guard poll(&writable, 1, 3_000) == 1 else { return false }
                }
                return true
            }
            guard complete else { break writing }
            written += 1
        }
        let report = "written=\(written)\nholding\n"
        _ = report.withCString { write(1, $0, strlen($0)) }
        while true { sleep(60) }
    }

    private static func identity(_ service: String, _ account: String, group: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
            kSecAttrAccount as String: account,
        ]
        if let group { query[kSecAttrAccessGroup as String] = group }
        return query
    }

    private static func printValue(_ query: [String: Any]) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        print("status=\(status)")
        print("value=\((result as? Data).map { String(decoding: $0, as: UTF8.self) } ?? "")")
    }

    private static func hexData(_ hex: String) -> Data? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = Data()
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }

    private static func usage() -> Never {
        FileHandle.standardError.write(
            Data("isolation-probe: unknown command \(CommandLine.arguments.dropFirst())\n".utf8))
        exit(2)
    }
}

/// Answers every "wants to use" question with one choice and every passcode question with one passcode, printing
/// what it was asked.
private struct ScriptedPresenter: EvaluationPresenter {
    let choice: String
    let passcode: String?

    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        respond(.fallback)
    }

    func fingerprintPrompt(_ event: FingerprintPromptEvent) {}
    func fingerprintPromptDidEnd() {}

    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        passcode.map { SecureBytes(Array($0.utf8)) }
    }

    func show(_ message: PasscodeMessage) {}

    func confirm(_ prompt: TrustPrompt) -> TrustChoice? {
        print("asked=\(prompt.text)")
        print("changed=\(prompt.changed)")
        return switch choice {
        case "deny": .deny
        case "once": .allowOnce
        case "always": .alwaysAllow
        default: nil
        }
    }
}
