// keychain-stress: a helper the keychain tests start as a separate process, to test what one process cannot:
// two writers on one store, a writer killed with SIGKILL, and what a process using an enclave key holds in memory.
//
//   keychain-stress add <store-dir | socket:PATH> <prefix> <count>
//       adds generic passwords <prefix>-0 … <prefix>-(count-1), printing "added <i>" after each add that returned
//       success (stdout is flushed per line), and reads every tenth item back, exiting 1 on any failure. The store
//       is opened embedded, or (socket:PATH) reached through the localauthd listening there.
//
//   keychain-stress through-crashes <socket> <prefix> <stop-file>
//       adds generic passwords <prefix>-0, <prefix>-1, … through the localauthd at <socket> (values of 16 bytes to
//       24 KiB, from ``crashValue``) until <stop-file> exists, while the daemon is killed and restarted under it.
//       Prints "added <i>" after each add answered errSecSuccess, and "failed <i> <status>" after each that failed
//       with errSecNotAvailable (the daemon went away: the add may or may not have been committed); the next add
//       reconnects by itself. Any other failure exits 1.
//
//   keychain-stress hold-key <store-dir>
//       makes an enclave P-256 key in the embedded store (on the backend LA_ENCLAVE names), signs with it once,
//       prints "public <hex of 04||X||Y>" and then waits, engine and key still open, until it is killed: the tests
//       read its memory for the private scalar.
import EmbeddedEngine
import Foundation
import SecurityClient
import SecurityProtocol

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[1] == "hold-key" {
    do {
        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), accessGroups: ["stress"]))
        guard
            case .generated(let handle, let publicKey) = try client.sendBlocking(
                KeyRequest.generate(accessControl: nil, item: nil, context: nil)),
            case .signature = try client.sendBlocking(
                KeyRequest.sign(handle: handle, digest: Data(count: 32), context: nil))
        else {
            FileHandle.standardError.write(Data("keychain-stress: the key was not made or did not sign\n".utf8))
            exit(1)
        }
        FileHandle.standardOutput.write(Data("public \(publicKey.map { String(format: "%02x", $0) }.joined())\n".utf8))
        withExtendedLifetime(client) {
            while true { pause() }
        }
    } catch {
        FileHandle.standardError.write(Data("keychain-stress: \(error)\n".utf8))
        exit(1)
    }
}
/// The value of item `index` in `through-crashes`: a pattern of a length that varies from 16 bytes to 24 KiB, so
/// some items spill into SQLite's overflow pages.
func crashValue(_ index: Int) -> Data {
    let count = 16 + (index &* 7_919) % (24 << 10)
    return Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ index) })
}

if arguments.count == 5, arguments[1] == "through-crashes" {
    let (socket, prefix, stopFile) = (arguments[2], arguments[3], arguments[4])
    var client: SocketClient?
    var index = 0
    while access(stopFile, F_OK) != 0 {
        do {
            // The client reconnects on the request after a failure; a client made while the daemon is away fails
            // like a request would.
            let connected = try client ?? SocketClient(path: socket, accessGroups: ["stress"])
            client = connected
            _ = try connected.sendBlocking(
                .add([
                    "class": .string("genp"), "svce": .string("crash"), "acct": .string("\(prefix)-\(index)"),
                    "v_Data": .data(crashValue(index)),
                ]))
            FileHandle.standardOutput.write(Data("added \(index)\n".utf8))
        } catch let status as KeychainStatus where status.code == .notAvailable {
            FileHandle.standardOutput.write(Data("failed \(index) \(status.code.rawValue)\n".utf8))
            usleep(20_000)
        } catch {
            FileHandle.standardError.write(Data("keychain-stress: add \(index): \(error)\n".utf8))
            exit(1)
        }
        index += 1
    }
    exit(0)
}

guard arguments.count == 5, arguments[1] == "add", let count = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: keychain-stress add <store-dir | socket:PATH> <prefix> <count>\n".utf8))
    exit(2)
}
let prefix = arguments[3]
do {
    let client: any SecurityClient =
        if arguments[2].hasPrefix("socket:") {
            try SocketClient(path: String(arguments[2].dropFirst("socket:".count)), accessGroups: ["stress"])
        } else {
            try EmbeddedClient(
                configuration: EmbeddedConfiguration(
                    dataDirectory: URL(fileURLWithPath: arguments[2], isDirectory: true), accessGroups: ["stress"]))
        }
    for index in 0..<count {
        let account = "\(prefix)-\(index)"
        _ = try client.sendBlocking(
            .add([
                "class": .string("genp"), "svce": .string("stress"), "acct": .string(account),
                "v_Data": .data(Data(account.utf8)),
            ]))
        // One write(2) per line, so a line on the pipe means the add before it returned.
        FileHandle.standardOutput.write(Data("added \(index)\n".utf8))
        if index % 10 == 0 {
            let response = try client.sendBlocking(
                .copyMatching([
                    "class": .string("genp"), "svce": .string("stress"), "acct": .string(account),
                    "r_Data": .bool(true),
                ]))
            guard case .items(let results) = response,
                results.items.first?.data?.unprotectedData() == Data(account.utf8)
            else {
                FileHandle.standardError.write(Data("read back a wrong value for \(account)\n".utf8))
                exit(1)
            }
        }
    }
} catch {
    FileHandle.standardError.write(Data("keychain-stress: \(error)\n".utf8))
    exit(1)
}
