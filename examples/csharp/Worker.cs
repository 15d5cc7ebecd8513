// A C# worker, base class library only (Mono's mcs, or .NET): `mcs Worker.cs` and `mono Worker.exe`.
// It publishes STEPS updates (argument 1, default 3) to the daemon socket in
// $MCP_PROGRESS_SOCKET under $MCP_PROGRESS_TOKEN, stops early on a cancel, and ends with a done
// whose ack it waits for. Unix sockets only: on Windows open the pipe with NamedPipeClientStream.
using System;
using System.Collections.Generic;
using System.Net.Sockets;
using System.Text;

class Worker
{
    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static string JsonString(string text)
    {
        var output = new StringBuilder("\"");
        foreach (var c in text)
        {
            if (c == '"') output.Append("\\\"");
            else if (c == '\\') output.Append("\\\\");
            else if (c < 0x20) output.AppendFormat("\\u{0:x4}", (int)c);
            else output.Append(c);
        }
        return output.Append('"').ToString();
    }

    /// One frame: {"type":KIND,"data":{"v":1,"progressToken":TOKEN,FIELDS}} and a form feed.
    static void Send(Socket socket, string kind, string token, string fields)
    {
        var frame = "{\"type\":\"" + kind + "\",\"data\":{\"v\":1,\"progressToken\":" + JsonString(token) + fields + "}}\f";
        socket.Send(Encoding.UTF8.GetBytes(frame));
    }

    /// Frames the daemon sent within waitMs, split on the form feed (the daemon writes compact JSON).
    static List<string> Receive(Socket socket, List<byte> inbox, int waitMs)
    {
        if (socket.Poll(waitMs * 1000, SelectMode.SelectRead))
        {
            var chunk = new byte[4096];
            var got = socket.Receive(chunk);
            for (var i = 0; i < got; i++) inbox.Add(chunk[i]);
        }
        var frames = new List<string>();
        int end;
        while ((end = inbox.IndexOf(0x0c)) >= 0)
        {
            frames.Add(Encoding.UTF8.GetString(inbox.GetRange(0, end).ToArray()));
            inbox.RemoveRange(0, end + 1);
        }
        return frames;
    }

    /// The text of "key":"..." in a frame (enough for a cancel's reason).
    static string Field(string frame, string key)
    {
        var start = frame.IndexOf("\"" + key + "\":\"");
        if (start < 0) return "";
        start += key.Length + 4;
        var end = frame.IndexOf('"', start);
        return end < 0 ? "" : frame.Substring(start, end - start);
    }

    static int Main(string[] args)
    {
        var steps = args.Length > 0 ? int.Parse(args[0]) : 3;
        var path = Environment.GetEnvironmentVariable("MCP_PROGRESS_SOCKET");
        var token = Environment.GetEnvironmentVariable("MCP_PROGRESS_TOKEN");
        if (string.IsNullOrEmpty(path) || string.IsNullOrEmpty(token))
        {
            Console.Error.WriteLine("set MCP_PROGRESS_SOCKET and MCP_PROGRESS_TOKEN (mcp-progress run does)");
            return 2;
        }
        var socket = new Socket(AddressFamily.Unix, SocketType.Stream, ProtocolType.Unspecified);
        try
        {
            socket.Connect(new UnixDomainSocketEndPoint(path));
        }
        catch (SocketException error)
        {
            // Progress must never fail the job: say so, and do the work anyway.
            Console.Error.WriteLine("no daemon on " + path + ": " + error.Message);
            return 0;
        }
        var inbox = new List<byte>();
        string cancelled = null;
        Send(socket, "claim", token, "");
        for (var step = 1; step <= steps && cancelled == null; step++)
        {
            Send(socket, "progress", token, ",\"progress\":" + step + ",\"total\":" + steps + ",\"message\":" + JsonString("step " + step));
            // The work of one step; a cancel from the MCP side ends it early.
            foreach (var frame in Receive(socket, inbox, 100))
                if (frame.Contains("\"type\":\"cancel\"")) cancelled = Field(frame, "reason");
        }
        var status = cancelled == null ? "ok" : "cancelled";
        Send(socket, "done", token, ",\"status\":\"" + status + "\",\"message\":\"the result\",\"seq\":1");
        var deadline = DateTime.UtcNow.AddSeconds(5);
        var acked = false;
        while (!acked && DateTime.UtcNow < deadline)
            foreach (var frame in Receive(socket, inbox, 200))
                if (frame.Contains("\"type\":\"ack\"") && frame.Contains("\"seq\":1")) acked = true;
        Console.WriteLine(cancelled != null ? "cancelled: " + cancelled : "done delivered: " + (acked ? "true" : "false"));
        socket.Close();
        return 0;
    }
}
