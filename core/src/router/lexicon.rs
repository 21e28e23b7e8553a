//! Cross-language query expansion: a small table of everyday Chinese task words and the
//! English words skill descriptions use for them. Most skills describe themselves in
//! English only, so without it a Chinese query shares no term with them. It is data, not
//! code: add a line to widen it. An embedding backend (see the module doc) would make it
//! unnecessary.

/// `(Chinese substring, English words appended to the query)`.
const ENTRIES: &[(&str, &str)] = &[
    ("天气", "weather forecast"),
    ("下雨", "rain weather"),
    ("气温", "temperature weather"),
    ("温度", "temperature"),
    ("笔记", "note"),
    ("备忘录", "note"),
    ("提醒", "reminder"),
    ("待办", "todo task"),
    ("任务", "task"),
    ("邮件", "mail email"),
    ("邮箱", "mail inbox"),
    ("收件箱", "inbox"),
    ("日历", "calendar"),
    ("日程", "calendar schedule"),
    ("音乐", "music playback"),
    ("歌", "song music"),
    ("播放", "play playback"),
    ("音量", "volume"),
    ("音箱", "speaker"),
    ("灯", "light"),
    ("摄像头", "camera"),
    ("监控", "camera monitor"),
    ("截图", "screenshot capture"),
    ("截屏", "screenshot capture"),
    ("总结", "summarize"),
    ("摘要", "summarize summary"),
    ("概括", "summarize"),
    ("转录", "transcribe"),
    ("转写", "transcribe"),
    ("语音转文字", "speech text transcribe"),
    ("文字转语音", "text speech"),
    ("朗读", "text speech"),
    ("语音合成", "text speech"),
    ("编辑", "edit"),
    ("流程图", "diagram flow"),
    ("架构图", "diagram architecture"),
    ("图表", "diagram"),
    ("表情包", "meme"),
    ("动图", "gif animated"),
    ("密码", "password secret"),
    ("调试", "debug"),
    ("断点", "breakpoint"),
    ("拉取请求", "pr pull request"),
    ("仓库", "repo"),
    ("推文", "post x"),
    ("看板", "board"),
    ("卡片", "card"),
    ("订单", "order"),
    ("外卖", "order"),
    ("餐厅", "place"),
    ("附近", "place"),
    ("博客", "blog"),
    ("订阅源", "feed"),
    ("防火墙", "firewall"),
    ("加固", "harden"),
    ("服务器", "host server"),
    ("海报", "poster"),
    ("艺术", "art"),
    ("生成艺术", "generative art algorithmic"),
    ("网页", "web page url"),
    ("前端", "frontend"),
    ("界面", "ui interface"),
    ("测试", "test"),
    ("浏览器", "browser"),
    ("品牌", "brand"),
    ("主题", "theme"),
    ("幻灯片", "slide"),
    ("技能", "skill"),
    ("原型", "prototype"),
    ("可视化", "visual"),
    ("频谱", "spectrogram"),
    ("床垫", "pod"),
    ("睡眠", "sleep"),
    ("终端", "terminal"),
    ("会话", "session"),
    ("编程", "coding"),
    ("代码", "code"),
    ("费用", "cost"),
    ("成本", "cost"),
    ("用量", "usage"),
    ("工作流", "workflow"),
    ("审批", "approval"),
    ("公告", "internal communication"),
    ("周报", "internal update"),
    ("动画", "animated"),
    ("报错", "error debug"),
    ("安装", "install"),
    ("搜索", "search"),
    ("文档", "doc"),
];

/// The English words a Chinese query implies, tokenised like the index.
pub fn expand(query: &str) -> Vec<String> {
    ENTRIES
        .iter()
        .filter(|(zh, _)| query.contains(zh))
        .flat_map(|(_, en)| super::index::tokenize(en))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_maps_chinese_task_words_to_english_terms() {
        assert_eq!(expand("明天北京天气怎么样"), vec!["weather", "forecast"]);
        assert!(expand("hello").is_empty());
    }
}
