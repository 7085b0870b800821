import FIDOAuthenticator
import FIDOProtocol
import Foundation
import TestSupport
import Testing

/// The `/dev/uhid` transport. These machines have no uhid module, so the kernel's side is checked two ways: the
/// events' layout against `<linux/uhid.h>` itself (a C program the test compiles prints the offsets), and the
/// transport's loop over a socket pair standing where `/dev/uhid` would be (one event per read and write, as uhid).
@Suite("FIDO: the uhid transport")
struct UHIDTests {
    /// Offsets and sizes in the kernel's `struct uhid_event`, printed by a C program built against the header.
    func kernelLayout() async throws -> [String: Int] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("uhid-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("layout.c")
        try """
        #include <linux/uhid.h>
        #include <stddef.h>
        #include <stdio.h>
        #define AT(name, member) printf(name " %zu\\n", offsetof(struct uhid_event, member))
        int main(void) {
            printf("size %zu\\n", sizeof(struct uhid_event));
            printf("create2 %d\\ninput2 %d\\noutput %d\\ndestroy %d\\n", UHID_CREATE2, UHID_INPUT2, UHID_OUTPUT, UHID_DESTROY);
            printf("getReport %d\\ngetReportReply %d\\nsetReport %d\\nsetReportReply %d\\n", UHID_GET_REPORT,
                   UHID_GET_REPORT_REPLY, UHID_SET_REPORT, UHID_SET_REPORT_REPLY);
            AT("create.name", u.create2.name); AT("create.rd_size", u.create2.rd_size); AT("create.bus", u.create2.bus);
            AT("create.vendor", u.create2.vendor); AT("create.product", u.create2.product);
            AT("create.rd_data", u.create2.rd_data); AT("input.size", u.input2.size); AT("input.data", u.input2.data);
            AT("output.data", u.output.data); AT("output.size", u.output.size); AT("get.id", u.get_report.id);
            AT("getReply.id", u.get_report_reply.id); AT("getReply.err", u.get_report_reply.err);
            AT("set.id", u.set_report.id); AT("setReply.err", u.set_report_reply.err);
            return 0;
        }
        """.write(to: source, atomically: true, encoding: .utf8)
        let program = directory.appendingPathComponent("layout").path
        let built = try await runCapturingOutput(URL(fileURLWithPath: "/usr/bin/cc"), [source.path, "-o", program])
        #expect(built.status == 0, "\(built.output)")
        let printed = try await runCapturingOutput(URL(fileURLWithPath: program), [])
        var layout: [String: Int] = [:]
        for line in printed.output.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let value = Int(fields[1]) { layout[String(fields[0])] = value }
        }
        return layout
    }

    func field(_ event: [UInt8], at offset: Int, size: Int) -> UInt64 {
        (0..<size).reversed().reduce(0) { $0 << 8 | UInt64(event[offset + $1]) }
    }

    @Test func eventsAreLaidOutAsTheKernelHeaderSays() async throws {
        let kernel = try await kernelLayout()
        #expect(kernel["size"] == UHID.eventSize, "\(kernel)")
        let create = UHID.create(name: "key", vendor: 0x1122_3344, product: 0x5566_7788, descriptor: [9, 8, 7])
        #expect(create.count == UHID.eventSize)
        #expect(field(create, at: 0, size: 4) == UInt64(try #require(kernel["create2"])))
        #expect(create[try #require(kernel["create.name"])...].starts(with: Array("key".utf8) + [0]))
        #expect(field(create, at: try #require(kernel["create.rd_size"]), size: 2) == 3)
        #expect(field(create, at: try #require(kernel["create.bus"]), size: 2) == 3, "BUS_USB")
        #expect(field(create, at: try #require(kernel["create.vendor"]), size: 4) == 0x1122_3344)
        #expect(field(create, at: try #require(kernel["create.product"]), size: 4) == 0x5566_7788)
        #expect(create[try #require(kernel["create.rd_data"])...].starts(with: [9, 8, 7]))

        let input = UHID.input(Array(repeating: 0xAB, count: 64))
        #expect(field(input, at: 0, size: 4) == UInt64(try #require(kernel["input2"])))
        #expect(field(input, at: try #require(kernel["input.size"]), size: 2) == 64)
        #expect(input[try #require(kernel["input.data"])...].starts(with: Array(repeating: 0xAB, count: 64)))
        #expect(field(UHID.destroy(), at: 0, size: 4) == UInt64(try #require(kernel["destroy"])))

        // What the kernel writes: an output report (with the leading report number hidraw passes), a feature
        // request, each answered where the header says.
        var output = [UInt8](repeating: 0, count: UHID.eventSize)
        output[0] = UInt8(try #require(kernel["output"]))
        let dataAt = try #require(kernel["output.data"])
        output.replaceSubrange((dataAt + 1)..<(dataAt + 65), with: Array(repeating: 0x5A, count: 64))
        output[try #require(kernel["output.size"])] = 65
        #expect(UHID.parse(output) == .output(Array(repeating: 0x5A, count: 64)))
        var get = [UInt8](repeating: 0, count: UHID.eventSize)
        get[0] = UInt8(try #require(kernel["getReport"]))
        get[try #require(kernel["get.id"])] = 42
        let event = try #require(UHID.parse(get))
        #expect(event == .getReport(id: 42))
        let reply = try #require(UHID.reply(to: event, error: 5))
        #expect(field(reply, at: 0, size: 4) == UInt64(try #require(kernel["getReportReply"])))
        #expect(field(reply, at: try #require(kernel["getReply.id"]), size: 4) == 42)
        #expect(field(reply, at: try #require(kernel["getReply.err"]), size: 2) == 5)
        var set = [UInt8](repeating: 0, count: UHID.eventSize)
        set[0] = UInt8(try #require(kernel["setReport"]))
        set[try #require(kernel["set.id"])] = 7
        let setEvent = try #require(UHID.parse(set))
        #expect(setEvent == .setReport(id: 7))
        let setReply = try #require(UHID.reply(to: setEvent, error: 5))
        #expect(field(setReply, at: 0, size: 4) == UInt64(try #require(kernel["setReportReply"])))
        #expect(field(setReply, at: try #require(kernel["setReply.err"]), size: 2) == 5)
    }

    /// The transport on one end of a SOCK_SEQPACKET pair (each write one event, as on /dev/uhid): it creates the
    /// device, answers a CTAPHID INIT written as an output report, refuses a feature report, and ends when the
    /// other side closes.
    @Test func theTransportMakesTheDeviceAndAnswersItsReports() async throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0)
        let kernelSide = pair[1]
        let transport = try FIDOUHIDTransport(descriptor: pair[0], authenticator: FIDOAuthenticator())
        func next() async -> [UInt8] {
            await onOwnThread {
                var buffer = [UInt8](repeating: 0, count: UHID.eventSize)
                let count = buffer.withUnsafeMutableBytes { recv(kernelSide, $0.baseAddress, $0.count, 0) }
                return Array(buffer.prefix(max(count, 0)))
            }
        }
        let create = await next()
        #expect(field(create, at: 0, size: 4) == UInt64(UHID.EventType.create2.rawValue))
        #expect(create.count == UHID.eventSize)
        let running = Task { try await transport.run() }

        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let initialize = CTAPHID.Message(channel: CTAPHID.broadcastChannel, command: .initialize, payload: nonce)
        var output = [UInt8](repeating: 0, count: UHID.eventSize)
        output[0] = UInt8(UHID.EventType.output.rawValue)
        output.replaceSubrange(5..<69, with: initialize.packets()[0])
        output[4 + 4096] = 65
        var feature = [UInt8](repeating: 0, count: UHID.eventSize)
        feature[0] = UInt8(UHID.EventType.getReport.rawValue)
        feature[4] = 9
        for event in [feature, output] {
            #expect(event.withUnsafeBytes { send(kernelSide, $0.baseAddress, $0.count, 0) } == UHID.eventSize)
        }
        let refused = await next()
        #expect(field(refused, at: 0, size: 4) == UInt64(UHID.EventType.getReportReply.rawValue))
        #expect(field(refused, at: 4, size: 4) == 9 && field(refused, at: 8, size: 2) == UInt64(EIO))
        let answer = await next()
        #expect(field(answer, at: 0, size: 4) == UInt64(UHID.EventType.input2.rawValue))
        #expect(field(answer, at: 4, size: 2) == 64)
        var assembler = CTAPHIDAssembler()
        guard case .message(let message) = assembler.receive(Array(answer[6..<70]), at: 0) else {
            Issue.record("no CTAPHID answer in \(Array(answer.prefix(80)))")
            return
        }
        #expect(message.command == CTAPHID.Command.initialize.rawValue && Array(message.payload.prefix(8)) == nonce)
        close(kernelSide)
        try await running.value
    }
}
